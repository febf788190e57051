import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The inference wing's floors (README.md, "Files"): a room imports only rooms on lower floors
 * (and itself). A new import that runs back up, or two rooms on one floor importing each other,
 * fails here, so the floors cannot slip one convenient import at a time.
 */
const FLOORS: readonly (readonly string[])[] = [
  ["core", "onnx"],
  ["prompt", "connect-errors"],
  ["grammar"],
  ["decoder"],
  ["score", "reply"],
  ["canvas"],
  ["engine"],
  ["service"],
  ["server"],
];

const WING = resolve(import.meta.dirname);
const floorOf = new Map(FLOORS.flatMap((rooms, floor) => rooms.map((room) => [room, floor] as const)));

function roomOf(path: string): string {
  const [first = "", ...rest] = relative(WING, path).split("/");
  return rest.length === 0 ? first.replace(/\.[jt]s$/, "") : first;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)].map((match) => resolve(dirname(file), match[1] ?? ""));
}

describe("services/inference floors", () => {
  const files = sources(WING);

  it("places every room of the wing on a floor", () => {
    const rooms = new Set(files.map(roomOf));
    expect([...rooms].filter((room) => !floorOf.has(room))).toEqual([]);
  });

  it("has no import from a room to a room on its own floor or above", () => {
    const upward: string[] = [];
    for (const file of files) {
      const from = roomOf(file);
      for (const target of importsOf(file)) {
        if (relative(WING, target).startsWith("..")) continue;
        const to = roomOf(target);
        if (to === from) continue;
        if ((floorOf.get(to) ?? Number.POSITIVE_INFINITY) >= (floorOf.get(from) ?? 0)) {
          upward.push(`${relative(WING, file)} -> ${relative(WING, target)}`);
        }
      }
    }
    expect(upward).toEqual([]);
  });
});
