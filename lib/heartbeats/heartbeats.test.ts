import { describe, expect, it, vi } from "vitest";
import { createInProcessWorkerDirectory } from "./in-process.js";
import { startHeartbeats } from "./publisher.js";
import { byLeastLoaded } from "./types.js";

describe("the in-process worker directory", () => {
  it("keeps workers live for the time to live after their last heartbeat", () => {
    let now = 0;
    const directory = createInProcessWorkerDirectory({ ttlMs: 1_000, clock: () => now });
    directory.publish({ id: "a", address: "", models: ["m"], slotsTotal: 2, slotsFree: 2 });
    now = 1_000;
    expect(directory.live().map((w) => w.id)).toEqual(["a"]);
    now = 1_001;
    expect(directory.live()).toEqual([]);
  });

  it("orders workers least loaded first", () => {
    const directory = createInProcessWorkerDirectory();
    directory.publish({ id: "c", address: "", models: [], slotsTotal: 8, slotsFree: 2 });
    directory.publish({ id: "b", address: "", models: [], slotsTotal: 4, slotsFree: 2 });
    directory.publish({ id: "a", address: "", models: [], slotsTotal: 4, slotsFree: 3 });
    directory.publish({ id: "d", address: "", models: [], slotsTotal: 4, slotsFree: 2 });
    expect(directory.live().map((w) => w.id)).toEqual(["a", "b", "d", "c"]);
    expect(
      byLeastLoaded(
        { id: "x", address: "", models: [], slotsTotal: 1, slotsFree: 1 },
        { id: "x", address: "", models: [], slotsTotal: 1, slotsFree: 1 },
      ),
    ).toBe(0);
  });
});

describe("startHeartbeats", () => {
  it("beats at once and on every interval, and withdraws when stopped", () => {
    vi.useFakeTimers();
    try {
      const directory = createInProcessWorkerDirectory({ clock: () => Date.now() });
      let free = 4;
      const beats = startHeartbeats(directory, () => ({ id: "w", address: "", models: ["m"], slotsTotal: 4, slotsFree: free }), 100);
      expect(directory.live()[0]!.slotsFree).toBe(4);
      free = 1;
      vi.advanceTimersByTime(100);
      expect(directory.live()[0]!.slotsFree).toBe(1);
      beats.stop();
      expect(directory.live()).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });
});
