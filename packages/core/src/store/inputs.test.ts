import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../errors.js";
import { copyData } from "./inputs.js";

describe("copyData", () => {
  it("deep-copies plain data, keeping shared references shared and cycles cyclic", () => {
    const ids = [1, 2, 3];
    const value: any = { a: ids, b: ids, nested: { list: [{ x: 1.5 }, null, "s", true] }, u: undefined };
    value.self = value;
    const copy = copyData(value);
    expect(copy).not.toBe(value);
    expect(copy.a).toEqual(ids);
    expect(copy.a).not.toBe(ids);
    expect(copy.b).toBe(copy.a);
    expect(copy.self).toBe(copy);
    expect(copy.nested.list[0]).not.toBe(value.nested.list[0]);
    expect(copy.nested).toEqual(value.nested);
    expect("u" in copy).toBe(true);
  });

  it("falls back to structuredClone for values that are not plain data", () => {
    const when = new Date(5);
    const copy = copyData({ when, map: new Map([[1, 2]]), big: 10n, bytes: new Uint8Array([1]) });
    expect(copy.when).toBeInstanceOf(Date);
    expect(copy.when).not.toBe(when);
    expect(copy.map.get(1)).toBe(2);
    expect(copy.big).toBe(10n);
    expect(copy.bytes).toEqual(new Uint8Array([1]));
    // holes survive
    const list = [1, 2, 3];
    delete list[1];
    const holey = copyData(list);
    expect(1 in holey).toBe(false);
    // an own "__proto__" key stays data and does not become the prototype
    const parsed = copyData(JSON.parse('{"__proto__": {"polluted": true}}'));
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect((parsed as any).polluted).toBeUndefined();
  });

  it("rejects functions and symbols naming the field", () => {
    expect(() => copyData({ f: () => 1 }, "input")).toThrow(InvalidArgumentError);
    expect(() => copyData(Symbol("s") as unknown, "input")).toThrow(/input/);
  });
});
