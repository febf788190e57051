// google.protobuf.Value <-> plain JSON, total and prototype-safe: objects are built with own
// properties only (a "__proto__" key stays a key), non-finite numbers become null as in JSON.
import { create, type JsonValue } from "@bufbuild/protobuf";
import { ListValueSchema, NullValue, StructSchema, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

export function protoValueToJson(value: Value | undefined): JsonValue | undefined {
  if (value === undefined) return undefined;
  const kind = value.kind;
  switch (kind.case) {
    case "nullValue":
      return null;
    case "numberValue":
      return Number.isFinite(kind.value) ? kind.value : null;
    case "stringValue":
    case "boolValue":
      return kind.value;
    case "listValue":
      return kind.value.values.map((v) => protoValueToJson(v) ?? null);
    case "structValue": {
      const out: { [key: string]: JsonValue } = {};
      for (const [key, v] of Object.entries(kind.value.fields)) defineKey(out, key, protoValueToJson(v) ?? null);
      return out;
    }
    default:
      return undefined;
  }
}

export function jsonToProtoValue(json: JsonValue): Value {
  if (json === null) return create(ValueSchema, { kind: { case: "nullValue", value: NullValue.NULL_VALUE } });
  switch (typeof json) {
    case "string":
      return create(ValueSchema, { kind: { case: "stringValue", value: json } });
    case "number":
      return Number.isFinite(json)
        ? create(ValueSchema, { kind: { case: "numberValue", value: json } })
        : create(ValueSchema, { kind: { case: "nullValue", value: NullValue.NULL_VALUE } });
    case "boolean":
      return create(ValueSchema, { kind: { case: "boolValue", value: json } });
  }
  if (Array.isArray(json)) {
    const values = json.map(jsonToProtoValue);
    return create(ValueSchema, { kind: { case: "listValue", value: create(ListValueSchema, { values }) } });
  }
  const struct = create(StructSchema);
  // A proto map cannot carry the key "__proto__" in JavaScript runtimes; it is left out rather
  // than allowed to replace the prototype of the fields object.
  for (const [key, v] of Object.entries(json)) {
    if (key !== "__proto__") struct.fields[key] = jsonToProtoValue(v);
  }
  return create(ValueSchema, { kind: { case: "structValue", value: struct } });
}

/** Writes an own, enumerable property, also for the keys "__proto__" and "constructor". */
export function defineKey<T>(target: { [key: string]: T }, key: string, value: T): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}
