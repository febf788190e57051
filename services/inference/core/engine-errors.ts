/**
 * The errors the engine raises. It knows nothing of RPC: the service edge
 * (connect-errors.ts, used by service.ts) maps each kind to a Connect code, in one table.
 */
export abstract class EngineError extends Error {
  abstract readonly kind: EngineErrorKind;
  /** `param`: the request field at fault (`messages[0].content[1]`), when known. */
  constructor(
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export type EngineErrorKind =
  | "invalid_request"
  | "prompt_too_long"
  | "model_not_served"
  | "unsupported"
  | "overloaded"
  | "cancelled"
  | "model_failure"
  | "shutting_down";

/** The request cannot be served as asked (a bad field, a conversation the template cannot render). */
export class InvalidRequest extends EngineError {
  readonly kind = "invalid_request";
}

/** The prompt does not fit the model's context. */
export class PromptTooLong extends EngineError {
  readonly kind = "prompt_too_long";
}

/** No engine on this worker serves the model. */
export class ModelNotServed extends EngineError {
  readonly kind = "model_not_served";
}

/** The model cannot do what the request needs (e.g. its template cannot force one tool). */
export class Unsupported extends EngineError {
  readonly kind = "unsupported";
}

/** Every generation slot is busy and the wait queue is full. */
export class Overloaded extends EngineError {
  readonly kind = "overloaded";
  constructor(
    message: string,
    /** When a retry may find a free slot. */
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/** The caller cancelled the request (its signal aborted). */
export class Cancelled extends EngineError {
  readonly kind = "cancelled";
  constructor() {
    super("request cancelled");
  }
}

/** The model failed on this request (a forward threw). */
export class ModelFailure extends EngineError {
  readonly kind = "model_failure";
}

/** The engine is closing; nothing new runs and what waits is refused. */
export class ShuttingDown extends EngineError {
  readonly kind = "shutting_down";
}
