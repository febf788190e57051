import { afterEach, describe, expect, it, vi } from "vitest";
import { DeadlineQueue } from "./deadlines.js";

interface Item {
  name: string;
  deadlineAt: number;
}
const item = (name: string): Item => ({ name, deadlineAt: 0 });
const fail = (err: unknown) => {
  throw err;
};

describe("DeadlineQueue", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("expires each item once its time has passed, in the order they were added, on one timer", () => {
    vi.useFakeTimers();
    let now = 0;
    const expired: string[] = [];
    const queue = new DeadlineQueue<Item>(
      100,
      (i) => expired.push(`${i.name}@${now}`),
      fail,
      () => now,
    );
    const a = item("a");
    queue.add(a);
    expect(a.deadlineAt).toBe(100);
    now = 30;
    vi.advanceTimersByTime(30);
    queue.add(item("b"));
    now = 60;
    vi.advanceTimersByTime(30);
    queue.add(item("c"));
    expect(vi.getTimerCount()).toBe(1);

    now = 100;
    vi.advanceTimersByTime(40);
    expect(expired).toEqual(["a@100"]);
    now = 130;
    vi.advanceTimersByTime(30);
    expect(expired).toEqual(["a@100", "b@130"]);
    now = 160;
    vi.advanceTimersByTime(30);
    expect(expired).toEqual(["a@100", "b@130", "c@160"]);
    expect(queue.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("never expires an item deleted before its time, and goes on with the next", () => {
    vi.useFakeTimers();
    let now = 0;
    const expired: string[] = [];
    const queue = new DeadlineQueue<Item>(
      50,
      (i) => expired.push(i.name),
      fail,
      () => now,
    );
    const a = item("a");
    queue.add(a);
    now = 10;
    vi.advanceTimersByTime(10);
    queue.add(item("b"));
    queue.delete(a);
    now = 50;
    vi.advanceTimersByTime(40);
    expect(expired).toEqual([]);
    now = 60;
    vi.advanceTimersByTime(10);
    expect(expired).toEqual(["b"]);
  });

  it("arms its timer again when an item is added after the queue ran empty", () => {
    vi.useFakeTimers();
    let now = 0;
    const expired: string[] = [];
    const queue = new DeadlineQueue<Item>(
      20,
      (i) => expired.push(i.name),
      fail,
      () => now,
    );
    const a = item("a");
    queue.add(a);
    queue.delete(a);
    now = 20;
    vi.advanceTimersByTime(20);
    expect(vi.getTimerCount()).toBe(0);
    queue.add(item("b"));
    now = 40;
    vi.advanceTimersByTime(20);
    expect(expired).toEqual(["b"]);
  });

  it("reports an expiry that throws and goes on expiring the others", () => {
    vi.useFakeTimers();
    let now = 0;
    const expired: string[] = [];
    const errors: unknown[] = [];
    const queue = new DeadlineQueue<Item>(
      10,
      (i) => {
        expired.push(i.name);
        if (i.name === "a") throw new Error("boom");
      },
      (err) => errors.push(err),
      () => now,
    );
    queue.add(item("a"));
    queue.add(item("b"));
    now = 10;
    vi.advanceTimersByTime(10);
    expect(expired).toEqual(["a", "b"]);
    expect(errors).toEqual([new Error("boom")]);
  });

  it("does not keep the process alive for its timer", () => {
    const queue = new DeadlineQueue<Item>(60_000, () => undefined, fail);
    queue.add(item("a"));
    const timer = (queue as unknown as { timer: NodeJS.Timeout }).timer;
    expect(timer.hasRef()).toBe(false);
    queue.stop();
  });
});
