import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import type { EchoReply, EchoRequest } from "../test/helpers/echo-thread.js";
import { startModuleWorker } from "./module-worker.js";
import { WorkerChannel, type WorkerChannelOptions } from "./worker-channel.js";

const echoThread = new URL("../test/helpers/echo-thread.ts", import.meta.url).href;

const channels: WorkerChannel<EchoRequest, EchoReply>[] = [];
function echoChannel(options: Partial<WorkerChannelOptions<EchoReply>> = {}): WorkerChannel<EchoRequest, EchoReply> {
  const channel = new WorkerChannel<EchoRequest, EchoReply>({
    start: () => startModuleWorker("echo-thread", echoThread),
    name: "the echo worker",
    settle: (reply) => (reply.ok ? { value: reply.value } : { error: new Error(reply.message) }),
    ...options,
  });
  channels.push(channel);
  return channel;
}

afterEach(async () => {
  await Promise.all(channels.splice(0).map((c) => c.terminate()));
});

describe("WorkerChannel", () => {
  it("matches replies to calls by id, whatever order they come back in", async () => {
    const channel = echoChannel();
    const order: string[] = [];
    const arrived = (value: string) => {
      order.push(value);
      return value;
    };
    const slow = channel.call<string>({ op: "echo", value: "slow", delayMs: 200 }).then(arrived);
    const fast = channel.call<string>({ op: "echo", value: "fast" }).then(arrived);
    await expect(Promise.all([slow, fast])).resolves.toEqual(["slow", "fast"]);
    expect(order).toEqual(["fast", "slow"]);
    await expect(channel.call({ op: "fail", message: "no such thing" })).rejects.toThrow("no such thing");
    expect(channel.pending).toBe(0);
  });

  it("transfers the buffers it is given instead of copying them", async () => {
    const channel = echoChannel();
    const data = new Float32Array([1, 2, 3.5]);
    await expect(channel.call({ op: "sum", data }, [data.buffer])).resolves.toBe(6.5);
    expect(data.buffer.byteLength).toBe(0);
    const kept = new Float32Array([4]);
    await expect(channel.call({ op: "sum", data: kept })).resolves.toBe(4);
    expect(kept.length).toBe(1);
  });

  it("fails every pending call when the worker crashes, then stays gone", async () => {
    const exits: number[] = [];
    const channel = echoChannel({ onExit: (code) => exits.push(code) });
    const hanging = channel.call({ op: "hang" });
    const crashing = channel.call({ op: "crash", code: 3 });
    await expect(hanging).rejects.toThrow("the echo worker exited (code 3)");
    await expect(crashing).rejects.toThrow("the echo worker exited (code 3)");
    expect(exits).toEqual([3]);
    expect(channel.pending).toBe(0);
    await expect(channel.call({ op: "echo", value: "again" })).rejects.toThrow("the echo worker exited (code 3)");
  });

  it("starts a fresh worker after a crash when asked to restart", async () => {
    const channel = echoChannel({ restart: true, lazy: true });
    await expect(channel.call({ op: "crash", code: 5 })).rejects.toThrow("exited (code 5)");
    await expect(channel.call({ op: "echo", value: "again" })).resolves.toBe("again");
    const hanging = channel.call({ op: "hang" });
    await channel.terminate();
    await expect(hanging).rejects.toThrow("the echo worker exited");
    await expect(channel.call({ op: "echo", value: "after close" })).resolves.toBe("after close");
    const closing = expect(channel.call({ op: "hang" })).rejects.toThrow("the echo worker was closed");
    await channel.terminate(new Error("the echo worker was closed"));
    await closing;
  });

  it("keeps the process open only while a call is pending", async () => {
    // A process whose channel has answered its calls exits by itself; one with a call pending waits for its reply.
    const script = (calls: string) => `
      import { WorkerChannel } from ${JSON.stringify(new URL("./worker-channel.ts", import.meta.url).href)};
      import { startModuleWorker } from ${JSON.stringify(new URL("./module-worker.ts", import.meta.url).href)};
      const channel = new WorkerChannel({ start: () => startModuleWorker("echo-thread", ${JSON.stringify(echoThread)}), name: "echo",
        settle: (r) => ({ value: r.value }) });
      ${calls}`;
    const run = (calls: string) =>
      promisify(execFile)(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script(calls)], { timeout: 20_000 });
    const idle = await run(`console.log(await channel.call({ op: "echo", value: "answered" }));`);
    expect(idle.stdout.trim()).toBe("answered");
    // The worker is running (and idle) before the call that keeps the process open is made.
    const pending = await run(`await channel.call({ op: "echo", value: "started" });
      channel.call({ op: "echo", value: "late", delayMs: 300 }).then((v) => console.log(v));`);
    expect(pending.stdout.trim()).toBe("late");
  }, 30_000);
});
