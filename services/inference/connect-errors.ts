import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { type InferenceService, OverloadedSchema } from "../../gen/tessera/inference/v1/inference_pb.js";
import { ERROR_PARAM_METADATA } from "../../lib/error-param.js";
import { EngineError, type EngineErrorKind, Overloaded } from "./core/engine-errors.js";

/** The engine's errors as Connect codes: the one table (services/inference/README.md). */
export const CONNECT_CODES: Readonly<Record<EngineErrorKind, Code>> = {
  invalid_request: Code.InvalidArgument,
  prompt_too_long: Code.InvalidArgument,
  model_not_served: Code.NotFound,
  unsupported: Code.FailedPrecondition,
  overloaded: Code.ResourceExhausted,
  cancelled: Code.Canceled,
  model_failure: Code.Unavailable,
  shutting_down: Code.Unavailable,
};

/** An engine error as the Connect error callers see (overload with its retry-after detail); anything else as it is. */
export function toConnectError(err: unknown): unknown {
  if (!(err instanceof EngineError)) return err;
  const details = err instanceof Overloaded ? [{ desc: OverloadedSchema, value: { retryAfterSeconds: err.retryAfterSeconds } }] : undefined;
  const metadata = err.param === undefined ? undefined : new Headers({ [ERROR_PARAM_METADATA]: err.param });
  return new ConnectError(err.message, CONNECT_CODES[err.kind], metadata, details, err);
}

type Impl = ServiceImpl<typeof InferenceService>;

/** A unary method whose engine errors are mapped. */
function mapped<Req, Res>(method: (req: Req, ctx: HandlerContext) => Res | Promise<Res>) {
  return async (req: Req, ctx: HandlerContext): Promise<Res> => {
    try {
      return await method(req, ctx);
    } catch (err) {
      throw toConnectError(err);
    }
  };
}

/** The service with every engine error mapped at its edge (`toConnectError`), streams included. */
export function withConnectErrors(impl: Impl): Impl {
  return {
    async *generate(req, ctx) {
      try {
        yield* impl.generate(req, ctx);
      } catch (err) {
        throw toConnectError(err);
      }
    },
    score: mapped(impl.score),
    countTokens: mapped(impl.countTokens),
    getModelInfo: mapped(impl.getModelInfo),
  };
}
