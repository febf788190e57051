import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { QuotaExceededSchema, RateLimitedSchema, UsageKind } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { ValidationFailureSchema } from "../../gen/tessera/decision/v1/decision_pb.js";
import { OverloadedSchema } from "../../gen/tessera/inference/v1/inference_pb.js";
import { CONNECT_TO_HTTP, HttpError, errorBody, errorFromConnect, toHttpError } from "../../gateway/errors.js";
import { ERROR_PARAM_METADATA } from "../../lib/error-param.js";

describe("the Connect → HTTP table", () => {
  it("maps every code, with the statuses of docs/architecture.md §7", () => {
    const codes = Object.values(Code).filter((c): c is Code => typeof c === "number");
    for (const code of codes) expect(CONNECT_TO_HTTP[code], Code[code]).toBeDefined();
    const status = (code: Code) => errorFromConnect(new ConnectError("x", code)).status;
    expect(status(Code.InvalidArgument)).toBe(400);
    expect(status(Code.Unauthenticated)).toBe(401);
    expect(status(Code.PermissionDenied)).toBe(403);
    expect(status(Code.NotFound)).toBe(404);
    expect(status(Code.ResourceExhausted)).toBe(429);
    expect(status(Code.Unavailable)).toBe(503);
    expect(errorFromConnect(new ConnectError("x", Code.Unavailable)).type).toBe("api_error");
    expect(errorFromConnect(new ConnectError("x", Code.PermissionDenied)).type).toBe("permission_error");
    expect(errorFromConnect(new ConnectError("x", Code.Unauthenticated)).type).toBe("authentication_error");
  });

  it("lets details decide: Overloaded is 529 with retry-after whatever the code", () => {
    for (const code of [Code.ResourceExhausted, Code.Unavailable]) {
      const err = errorFromConnect(
        new ConnectError("busy", code, undefined, [{ desc: OverloadedSchema, value: { retryAfterSeconds: 7 } }]),
      );
      expect(err.status).toBe(529);
      expect(err.type).toBe("overloaded_error");
      expect(err.options.headers).toEqual({ "retry-after": "7" });
    }
    const zero = errorFromConnect(new ConnectError("busy", Code.ResourceExhausted, undefined, [{ desc: OverloadedSchema, value: {} }]));
    expect(zero.options.headers).toEqual({ "retry-after": "1" });
  });

  it("tells the rate limit from the quota", () => {
    const rate = errorFromConnect(
      new ConnectError("slow down", Code.ResourceExhausted, undefined, [
        { desc: RateLimitedSchema, value: { retryAfterSeconds: 12, limit: 60 } },
      ]),
    );
    expect(rate).toMatchObject({
      status: 429,
      type: "rate_limit_error",
      options: { code: "rate_limit_exceeded", headers: { "retry-after": "12" } },
    });
    const quota = errorFromConnect(
      new ConnectError("used up", Code.ResourceExhausted, undefined, [{ desc: QuotaExceededSchema, value: { kind: UsageKind.TEXT } }]),
    );
    expect(quota).toMatchObject({ status: 429, type: "insufficient_quota", options: { code: "insufficient_quota" } });
    // No retry-after on a spent quota, and the clients that read it are told not to retry.
    expect(quota.options.headers).toEqual({ "x-should-retry": "false" });
  });

  it("hides the message of internal errors and of anything that is not an HTTP or Connect error", () => {
    const internal = errorFromConnect(new ConnectError("stack trace at /srv/secret.ts:12", Code.Internal));
    expect(internal.status).toBe(500);
    expect(internal.message).not.toContain("secret");
    const thrown = toHttpError(new TypeError("cannot read x of undefined"));
    expect(thrown).toMatchObject({ status: 500, type: "api_error" });
    expect(thrown.message).not.toContain("undefined");
  });
});

describe("error bodies", () => {
  const violations = [
    { loc: ["body", "questions", "q1", "criteria"], msg: "criteria is required", type: "missing" },
    { loc: ["body", "messages", 2, "role"], msg: "bad role", type: "enum" },
  ];

  it("render in the detail shape, validation failures as a 422 list", () => {
    expect(errorBody("detail", new HttpError(401, "authentication_error", "bad key"))).toEqual({
      status: 401,
      body: {
        detail: { error_type: "authentication_error", message: "bad key" },
        error: { message: "bad key", type: "authentication_error", code: "authentication_error", param: null },
      },
    });
    expect(errorBody("detail", HttpError.invalid(violations))).toEqual({
      status: 422,
      body: {
        detail: violations,
        error: {
          message: "questions.q1.criteria: criteria is required (and 1 more problem)",
          type: "invalid_request_error",
          code: "invalid_request",
          param: "questions.q1.criteria",
        },
      },
    });
  });

  it("render in the OpenAI shape, validation failures as a 400 naming the first param", () => {
    expect(errorBody("openai", new HttpError(429, "rate_limit_error", "slow", { code: "rate_limit_exceeded" }))).toEqual({
      status: 429,
      body: { error: { message: "slow", type: "rate_limit_error", code: "rate_limit_exceeded", param: null } },
    });
    const { status, body } = errorBody("openai", HttpError.invalid([violations[1]!, violations[0]!]));
    expect(status).toBe(400);
    expect(body).toEqual({
      error: {
        message: "messages[2].role: bad role (and 1 more problem)",
        type: "invalid_request_error",
        code: "invalid_request",
        param: "messages[2].role",
      },
    });
  });

  it("name the field a service refused (its param metadata) in the 400", () => {
    const err = errorFromConnect(
      new ConnectError(
        "does not support image input",
        Code.InvalidArgument,
        new Headers({ [ERROR_PARAM_METADATA]: "messages[0].content[1]" }),
      ),
    );
    expect(errorBody("openai", err).body).toEqual({
      error: {
        message: "does not support image input",
        type: "invalid_request_error",
        code: "invalid_request",
        param: "messages[0].content[1]",
      },
    });
    expect(errorFromConnect(new ConnectError("bad", Code.InvalidArgument)).options.param).toBeNull();
  });

  it("carry the decision service's violations through Connect", () => {
    const err = errorFromConnect(
      new ConnectError("invalid", Code.InvalidArgument, undefined, [
        { desc: ValidationFailureSchema, value: { violations: [{ loc: ["body", "questions", "a b"], msg: "m", type: "t" }] } },
      ]),
    );
    expect(errorBody("detail", err)).toEqual({
      status: 422,
      body: {
        detail: [{ loc: ["body", "questions", "a b"], msg: "m", type: "t" }],
        error: { message: "questions.a b: m", type: "invalid_request_error", code: "invalid_request", param: "questions.a b" },
      },
    });
  });
});
