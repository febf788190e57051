import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { WorkerDirectory, WorkerHeartbeat } from "../../lib/heartbeats/types.js";

/** A directory as a worker sees it (publisher) and as a router elsewhere sees it (observer). */
export interface DirectoryPair {
  publisher: WorkerDirectory;
  observer: WorkerDirectory;
  close(): Promise<void>;
}

export interface DirectoryContext {
  ttlMs: number;
  clock: () => number;
}

const beat = (id: string, slotsFree: number, models = ["m"]): WorkerHeartbeat => ({
  id,
  address: `http://${id}:8080`,
  models,
  slotsTotal: 4,
  slotsFree,
});

async function eventually(check: () => void, ms = 3_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      check();
      return;
    } catch (err) {
      if (Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/**
 * What every WorkerDirectory adapter must do, embedded (in-process) or NATS: the observer
 * sees what the publisher announces (eventually: NATS delivers asynchronously), least
 * loaded first, forgets withdrawn workers at once and silent ones after the time to live.
 */
export function runWorkerDirectoryContract(name: string, make: (ctx: DirectoryContext) => Promise<DirectoryPair>): void {
  describe(`WorkerDirectory contract: ${name}`, () => {
    let now = 1_000_000;
    let pair: DirectoryPair;
    beforeEach(async () => {
      now = 1_000_000;
      pair = await make({ ttlMs: 3_000, clock: () => now });
    });
    afterEach(async () => {
      await pair.close();
    });

    it("shows announced workers least loaded first, with their latest heartbeat", async () => {
      pair.publisher.publish(beat("a", 1));
      pair.publisher.publish(beat("b", 3));
      pair.publisher.publish(beat("c", 3, ["m", "n"]));
      await eventually(() => expect(pair.observer.live().map((w) => w.id)).toEqual(["b", "c", "a"]));
      pair.publisher.publish(beat("a", 4));
      await eventually(() =>
        expect(pair.observer.live().map((w) => [w.id, w.slotsFree])).toEqual([
          ["a", 4],
          ["b", 3],
          ["c", 3],
        ]),
      );
      const c = pair.observer.live().find((w) => w.id === "c")!;
      expect(c).toMatchObject({ address: "http://c:8080", models: ["m", "n"], slotsTotal: 4 });
      expect(c.lastSeenUnixMs).toBe(now);
    });

    it("keeps its own copy of what was announced", async () => {
      const heartbeat = beat("a", 2);
      pair.publisher.publish(heartbeat);
      heartbeat.models.push("changed");
      await eventually(() => expect(pair.observer.live()).toHaveLength(1));
      expect(pair.observer.live()[0]!.models).toEqual(["m"]);
    });

    it("forgets a withdrawn worker at once and a silent one after the time to live", async () => {
      pair.publisher.publish(beat("a", 2));
      pair.publisher.publish(beat("b", 2));
      await eventually(() => expect(pair.observer.live()).toHaveLength(2));
      pair.publisher.withdraw("a");
      await eventually(() => expect(pair.observer.live().map((w) => w.id)).toEqual(["b"]));
      now += 3_000;
      expect(pair.observer.live().map((w) => w.id)).toEqual(["b"]);
      now += 1;
      expect(pair.observer.live()).toEqual([]);
      // A worker that beats again is back.
      pair.publisher.publish(beat("b", 1));
      await eventually(() => expect(pair.observer.live().map((w) => w.id)).toEqual(["b"]));
    });
  });
}
