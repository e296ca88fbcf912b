import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { InMemoryLightningStore } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { LLMProxy } from "@agl/proxy";
import { silentServerLogger, startStoreServer } from "@agl/store";
import { validate as lintDockerfile } from "dockerfile-utils";
import { Deployment } from "kubernetes-models/apps/v1/Deployment";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram, proxyOptionsFromArgs } from "../../packages/proxy/src/cli.js";
import { resolveOptions } from "../../packages/proxy/src/options.js";
import { ROOT, spawnTs } from "../store-http/processes.js";
import { DEPLOY, dockerInstructions, type K8sObject, loadManifests } from "./manifests.js";

/**
 * deploy/ is checked without Docker or a cluster and without the network: the manifests against the
 * Kubernetes API schemas (kubernetes-models), the Dockerfile with a Dockerfile linter
 * (dockerfile-utils), and both against the code they run: CLI flags, health routes, ports, secrets.
 */

const manifests = loadManifests();
const byKind = (kind: string) => manifests.filter((m) => m.object.kind === kind).map((m) => m.object);
const deployments = byKind("Deployment");
const services = byKind("Service");
const secrets = byKind("Secret");
const container = (d: K8sObject) => d.spec.template.spec.containers[0];
const dockerfile = readFileSync(join(DEPLOY, "Dockerfile"), "utf8");
const instructions = dockerInstructions(dockerfile);

describe("Kubernetes manifests", () => {
  it("are valid objects of the Kubernetes API (schema validation of every field)", () => {
    expect(manifests.map((m) => `${m.object.kind}/${m.object.metadata.name}`).sort()).toEqual([
      "Deployment/agl-proxy",
      "Deployment/agl-store",
      "Deployment/agl-worker",
      "Secret/agl-secrets",
      "Service/agl-proxy",
      "Service/agl-store",
    ]);
    const models: Record<string, new (data: any) => { validate(): void }> = { Deployment, Service, Secret };
    for (const { file, object } of manifests) {
      expect(() => new models[object.kind]!(object).validate(), file).not.toThrow();
    }
    // The validator is not a rubber stamp.
    const broken = structuredClone(deployments[0]!);
    broken.spec.replicas = "three";
    expect(() => new Deployment(broken).validate()).toThrow(/replicas/);
  });

  it("hang together: selectors, named ports, secret keys, non-root pods, one image", () => {
    const secretKeys = new Set(Object.keys(secrets[0]!.stringData));
    for (const d of deployments) {
      expect(d.spec.selector.matchLabels).toEqual(
        Object.fromEntries(
          Object.keys(d.spec.selector.matchLabels).map((k) => [k, d.spec.template.metadata.labels[k]]),
        ),
      );
      const pod = d.spec.template.spec;
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
      const c = container(d);
      expect(c.image).toBe(container(deployments[0]!).image);
      expect(c.securityContext.allowPrivilegeEscalation).toBe(false);
      for (const env of c.env ?? []) {
        if (env.valueFrom?.secretKeyRef) {
          expect(env.valueFrom.secretKeyRef.name).toBe(secrets[0]!.metadata.name);
          expect(secretKeys.has(env.valueFrom.secretKeyRef.key), env.name).toBe(true);
        }
      }
      const portNames = new Set((c.ports ?? []).map((p: { name: string }) => p.name));
      for (const probe of [c.readinessProbe, c.livenessProbe].filter(Boolean)) {
        expect(portNames.has(probe.httpGet.port), `${d.metadata.name} probe port`).toBe(true);
      }
      for (const m of c.volumeMounts ?? []) {
        expect(pod.volumes.map((v: { name: string }) => v.name)).toContain(m.name);
      }
    }
    for (const s of services) {
      const target = deployments.find((d) =>
        Object.entries(s.spec.selector).every(([k, v]) => d.spec.template.metadata.labels[k] === v),
      );
      expect(target, `service ${s.metadata.name} selects a deployment`).toBeDefined();
      const names = container(target!).ports.map((p: { name: string }) => p.name);
      for (const p of s.spec.ports) expect(names).toContain(p.targetPort);
    }
    // The store and the proxy have readiness and liveness probes; the workers scale.
    for (const name of ["agl-store", "agl-proxy"]) {
      const c = container(deployments.find((d) => d.metadata.name === name)!);
      expect(c.readinessProbe?.httpGet.path).toBeTruthy();
      expect(c.livenessProbe?.httpGet.path).toBeTruthy();
    }
    expect(deployments.find((d) => d.metadata.name === "agl-worker")!.spec.replicas).toBeGreaterThan(1);
  });

  it("run commands the image provides, with flags the CLIs accept", async () => {
    const linked = instructions
      .filter((i) => i.keyword === "RUN")
      .flatMap((i) =>
        [...i.args.matchAll(/ln -s (\S+) \/usr\/local\/bin\/(\S+)/g)].map((m) => [m[2]!, m[1]!]),
      );
    const cli = Object.fromEntries(linked);
    for (const d of deployments) expect(Object.keys(cli)).toContain(container(d).command[0]);

    // agl-proxy: parse the args with its own command-line parser and option schema.
    const proxy = container(deployments.find((d) => d.metadata.name === "agl-proxy")!);
    const program = buildProgram().exitOverride();
    program.parse(["node", "agl-proxy", ...proxy.args]);
    const options = proxyOptionsFromArgs(program.opts(), { AGL_PROXY_ADMIN_TOKEN: "x".repeat(16) });
    const resolved = resolveOptions({ ...options, store: new InMemoryLightningStore() });
    expect(resolved.publicUrl).toBe(
      `http://${services.find((s) => s.metadata.name === "agl-proxy")!.metadata.name}:8080`,
    );

    // agl-store and agl-worker: every flag used is one their --help lists.
    for (const [name, script] of [
      ["agl-store", "packages/store/src/cli.ts"],
      ["agl-worker", "packages/client/src/cli.ts"],
    ] as const) {
      const child = spawnTs(script, ["--help"]);
      expect(await child.exited).toBe(0);
      const c = container(deployments.find((d) => d.metadata.name === name)!);
      for (const flag of c.args.filter((a: string) => a.startsWith("--"))) {
        expect(child.stdout(), `${name} ${flag}`).toContain(`${flag} `);
      }
    }
    // The store and proxy publish their Service names, which is what the workers are given.
    const store = container(deployments.find((d) => d.metadata.name === "agl-store")!);
    const storeService = services.find((s) => s.metadata.name === "agl-store")!;
    const storePublic = `http://${storeService.metadata.name}:${storeService.spec.ports[0].port}`;
    expect(store.args[store.args.indexOf("--public-url") + 1]).toBe(storePublic);
    for (const c of [proxy, container(deployments.find((d) => d.metadata.name === "agl-worker")!)]) {
      expect(c.args[c.args.indexOf("--store") + 1]).toBe(storePublic);
    }
    // The worker's agent file sits in the mounted agents folder.
    const worker = container(deployments.find((d) => d.metadata.name === "agl-worker")!);
    const agent = worker.args[worker.args.indexOf("--agent") + 1];
    expect(agent.startsWith(`${worker.volumeMounts[0].mountPath}/`)).toBe(true);
    expect(dockerfile).toContain(worker.volumeMounts[0].mountPath);
  });

  describe("probes answer on the real servers, without credentials", () => {
    let store: Awaited<ReturnType<typeof startStoreServer>>;
    let mock: Awaited<ReturnType<typeof startMockLLMServer>>;
    let proxy: LLMProxy;
    beforeAll(async () => {
      store = await startStoreServer({
        store: new InMemoryLightningStore(),
        port: 0,
        token: "store-token",
        logger: silentServerLogger,
      });
      mock = await startMockLLMServer({ port: 0 });
      proxy = new LLMProxy({
        store: new InMemoryLightningStore(),
        backends: [{ url: mock.baseURL }],
        adminToken: "admin-token-0123456789",
        healthCheckIntervalMs: 0,
      });
      await proxy.start();
    });
    afterAll(async () => {
      await proxy.stop();
      await mock.close();
      await store.close();
    });

    it("store and proxy", async () => {
      for (const [name, base] of [
        ["agl-store", store.url],
        ["agl-proxy", proxy.url],
      ] as const) {
        const c = container(deployments.find((d) => d.metadata.name === name)!);
        for (const probe of [c.readinessProbe, c.livenessProbe]) {
          const res = await fetch(`${base}${probe.httpGet.path}`);
          expect(res.status, `${name} ${probe.httpGet.path}`).toBe(200);
        }
      }
    });
  });
});

describe("Dockerfile", () => {
  it("passes the Dockerfile linter with no diagnostics", () => {
    expect(lintDockerfile(dockerfile).map((d) => `${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
    expect(lintDockerfile("FROM node:20\nEXPOSE http\nUSER\n").length).toBeGreaterThan(0);
  });

  it("is multi-stage, small and non-root, and pinned like the repository", () => {
    const froms = instructions.filter((i) => i.keyword === "FROM");
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const final = froms.length - 1;
    expect(froms[final]!.args).toMatch(/-slim\b/);
    for (const f of froms) {
      const image = f.args.split(" ")[0]!;
      expect(image, "base images carry a version tag").toMatch(/:[0-9]/);
    }
    const users = instructions.filter((i) => i.keyword === "USER" && i.stage === final);
    expect(users.at(-1)?.args).toMatch(/^(node|[1-9]\d*)$/);
    // Only build output is copied into the final image, never the sources.
    for (const c of instructions.filter((i) => i.keyword === "COPY" && i.stage === final)) {
      expect(c.args).toMatch(/^--from=build /);
    }
    expect(instructions.some((i) => i.keyword === "ADD")).toBe(false);
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    expect(dockerfile).toContain(`pnpm@${pkg.packageManager.split("@")[1]}`);
    expect(dockerfile).toContain("--frozen-lockfile");
    const nodeTag = /node:(\d+)\.(\d+)/.exec(froms[0]!.args)!;
    const [, major, minor] = /(\d+)\.(\d+)/.exec(pkg.engines.node)!;
    expect(Number(nodeTag[1])).toBe(Number(major));
    expect(Number(nodeTag[2])).toBeGreaterThanOrEqual(Number(minor));
  });

  it("links each command to the file its package publishes as that bin", () => {
    const links = instructions
      .filter((i) => i.keyword === "RUN")
      .flatMap((i) => [...i.args.matchAll(/ln -s \/app\/(\w+)\/(\S+) \/usr\/local\/bin\/(\S+)/g)]);
    const packageDir: Record<string, string> = { store: "store", worker: "client", proxy: "proxy" };
    expect(links.map((m) => m[3]).sort()).toEqual(["agl-proxy", "agl-store", "agl-worker"]);
    for (const [, dir, file, bin] of links) {
      const manifest = JSON.parse(
        readFileSync(join(ROOT, "packages", packageDir[dir!]!, "package.json"), "utf8"),
      );
      expect(manifest.bin[bin!]).toBe(`./${file}`);
      expect(dockerfile).toContain(`deploy --prod --legacy /out/${dir}`);
    }
    const exposed = instructions
      .find((i) => i.keyword === "EXPOSE")!
      .args.split(" ")
      .map(Number);
    for (const d of deployments)
      for (const p of container(d).ports ?? []) expect(exposed).toContain(p.containerPort);
  });

  it("has a build context filter that keeps out dependencies, build output and git", () => {
    const ignore = readFileSync(join(DEPLOY, "Dockerfile.dockerignore"), "utf8").split("\n");
    for (const entry of ["**/node_modules", "**/dist", ".git"]) expect(ignore).toContain(entry);
    // `COPY . .` needs what the build reads: the workspace files and every package's sources.
    for (const f of ["pnpm-workspace.yaml", "pnpm-lock.yaml", "package.json", "tsconfig.base.json"]) {
      expect(existsSync(join(ROOT, f)), f).toBe(true);
    }
  });
});
