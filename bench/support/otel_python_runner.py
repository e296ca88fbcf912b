"""The tracing of an Agent Lightning Python runner with OtelTracer, on the real OpenTelemetry Python SDK.

Per rollout, as the runner does it against a store that reports `otlp_traces`: start_rollout over the
store's HTTP API, a TracerProvider whose resource carries the rollout and attempt ids, every finished span
exported at once by the SDK's OTLP/HTTP protobuf exporter (SimpleSpanProcessor: one request per span), then
the attempt succeeds. Prints one JSON line: the wall seconds of each rollout and the rollout ids.

    PYTHONPATH=<opentelemetry-python packages> python3 otel_python_runner.py --url http://127.0.0.1:PORT \
        --rollouts 10 --spans 200 --seed 1

bench/store-otlp-python.ts runs it; it needs only the SDK, its OTLP/HTTP exporter, protobuf and requests.
"""

import argparse
import json
import random
import string
import time

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--rollouts", type=int, default=10)
    parser.add_argument("--spans", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    url = args.url.rstrip("/")
    rng = random.Random(args.seed)
    seconds = []
    rollout_ids = []
    for task in range(args.rollouts):
        t0 = time.perf_counter()
        session = requests.Session()
        started = session.post(
            f"{url}/v1/agl/rollouts",
            json={"input": {"task": task}, "mode": None, "resources_id": None, "config": None,
                  "metadata": None, "worker_id": None},
            timeout=30,
        )
        started.raise_for_status()
        body = started.json()
        rid, aid = body["rollout_id"], body["attempt"]["attempt_id"]
        provider = TracerProvider(
            resource=Resource.create(
                {"agentlightning.rollout_id": rid, "agentlightning.attempt_id": aid,
                 "agentlightning.tracer.name": "otel"}
            )
        )
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
        tracer = provider.get_tracer("agentlightning")
        for n in range(args.spans):
            with tracer.start_as_current_span(f"llm-call-{n}") as span:
                span.set_attribute("gen_ai.prompt", "".join(rng.choices(string.ascii_letters, k=rng.randint(20, 200))))
                span.set_attribute("gen_ai.usage.prompt_tokens", rng.randint(10, 500))
        provider.shutdown()
        session.post(
            f"{url}/v1/agl/rollouts/{rid}/attempts/{aid}", json={"status": "succeeded"}, timeout=30
        ).raise_for_status()
        session.close()
        seconds.append(time.perf_counter() - t0)
        rollout_ids.append(rid)
    print(json.dumps({"seconds": seconds, "rollout_ids": rollout_ids}))


if __name__ == "__main__":
    main()
