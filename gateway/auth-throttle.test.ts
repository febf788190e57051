import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { createAuthThrottle } from "./auth-throttle.js";

describe("auth throttle", () => {
  it("lets an address fail its budget, then refuses until a token has refilled", () => {
    let now = 1_000_000;
    const throttle = createAuthThrottle({ failuresPerMinute: 5, clock: () => now });
    for (let i = 0; i < 5; i++) {
      throttle.check("a");
      throttle.failed("a");
    }
    let refused: unknown;
    try {
      throttle.check("a");
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).rawMessage).toMatch(/Retry in 12 s/);
    expect(() => throttle.check("b")).not.toThrow();
    now += 12_000;
    expect(() => throttle.check("a")).not.toThrow();
    throttle.failed("a");
    expect(() => throttle.check("a")).toThrow(/Retry in 12 s/);
    now += 60_000;
    for (let i = 0; i < 5; i++) throttle.check("a");
  });

  it("never refuses with a budget of 0", () => {
    const throttle = createAuthThrottle({ failuresPerMinute: 0 });
    for (let i = 0; i < 100; i++) throttle.failed("a");
    expect(() => throttle.check("a")).not.toThrow();
  });
});
