/**
 * The OTLP trace messages (opentelemetry-proto v1, trace_service.proto and the files it imports),
 * compiled at load time by protobufjs. Only the field numbers and types matter on the wire; they are
 * those of the upstream schema (Apache-2.0, github.com/open-telemetry/opentelemetry-proto), and the
 * tests check them against the official @opentelemetry/exporter-trace-otlp-proto output.
 *
 * Written as edition 2023 with proto3's semantics (implicit presence, open enums, packed repeats) but
 * without proto3's UTF-8 check on strings: an exporter that writes a lone surrogate or invalid UTF-8
 * (the JavaScript SDK encodes a lone surrogate as such bytes) would otherwise lose its whole batch to
 * one string. Such bytes decode with U+FFFD in their place, the WHATWG decoder's rule.
 */
import protobuf from "protobufjs";

const OTLP_TRACE_PROTO = `
edition = "2023";
option features.field_presence = IMPLICIT;
option features.utf8_validation = NONE;
package opentelemetry.proto;

message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
    ArrayValue array_value = 5;
    KeyValueList kvlist_value = 6;
    bytes bytes_value = 7;
  }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
message KeyValue { string key = 1; AnyValue value = 2; }
message InstrumentationScope {
  string name = 1;
  string version = 2;
  repeated KeyValue attributes = 3;
  uint32 dropped_attributes_count = 4;
}
message Resource {
  repeated KeyValue attributes = 1;
  uint32 dropped_attributes_count = 2;
}
message ResourceSpans {
  Resource resource = 1;
  repeated ScopeSpans scope_spans = 2;
  string schema_url = 3;
}
message ScopeSpans {
  InstrumentationScope scope = 1;
  repeated Span spans = 2;
  string schema_url = 3;
}
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  fixed32 flags = 16;
  string name = 5;
  enum SpanKind {
    SPAN_KIND_UNSPECIFIED = 0;
    SPAN_KIND_INTERNAL = 1;
    SPAN_KIND_SERVER = 2;
    SPAN_KIND_CLIENT = 3;
    SPAN_KIND_PRODUCER = 4;
    SPAN_KIND_CONSUMER = 5;
  }
  SpanKind kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10;
  message Event {
    fixed64 time_unix_nano = 1;
    string name = 2;
    repeated KeyValue attributes = 3;
    uint32 dropped_attributes_count = 4;
  }
  repeated Event events = 11;
  uint32 dropped_events_count = 12;
  message Link {
    bytes trace_id = 1;
    bytes span_id = 2;
    string trace_state = 3;
    repeated KeyValue attributes = 4;
    uint32 dropped_attributes_count = 5;
    fixed32 flags = 6;
  }
  repeated Link links = 13;
  uint32 dropped_links_count = 14;
  Status status = 15;
}
message Status {
  string message = 2;
  enum StatusCode {
    STATUS_CODE_UNSET = 0;
    STATUS_CODE_OK = 1;
    STATUS_CODE_ERROR = 2;
  }
  StatusCode code = 3;
}
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ExportTracePartialSuccess {
  int64 rejected_spans = 1;
  string error_message = 2;
}
message ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
message RpcStatus {
  int32 code = 1;
  string message = 2;
}
`;

const root = protobuf.parse(OTLP_TRACE_PROTO).root;

export const ExportTraceServiceRequest = root.lookupType("opentelemetry.proto.ExportTraceServiceRequest");
export const ExportTraceServiceResponse = root.lookupType("opentelemetry.proto.ExportTraceServiceResponse");
/** google.rpc.Status without `details` (the OTLP error body). */
export const RpcStatus = root.lookupType("opentelemetry.proto.RpcStatus");

/** Decode a protobuf request into plain objects (camelCase keys, bytes as Uint8Array, 64-bit ints as strings). */
export function decodeTraceRequest(buffer: Uint8Array): Record<string, unknown> {
  const message = ExportTraceServiceRequest.decode(buffer);
  return ExportTraceServiceRequest.toObject(message, {
    longs: String,
    enums: Number,
    defaults: false,
  }) as Record<string, unknown>;
}

export function encodeTraceResponse(rejectedSpans: number, errorMessage: string): Uint8Array {
  // A message with nothing rejected is a warning (OTLP allows it); with neither, no partial_success.
  const payload =
    rejectedSpans > 0 || errorMessage !== "" ? { partialSuccess: { rejectedSpans, errorMessage } } : {};
  return ExportTraceServiceResponse.encode(ExportTraceServiceResponse.fromObject(payload)).finish();
}

export function encodeRpcStatus(code: number, message: string): Uint8Array {
  return RpcStatus.encode(RpcStatus.fromObject({ code, message })).finish();
}
