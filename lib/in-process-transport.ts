import { create, isMessage, type DescMessage, type DescMethod, type DescService, type MessageShape } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  type ContextValues,
  type HandlerContext,
  type ServiceImpl,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";

/** Registers service implementations on an in-process transport, like a ConnectRouter does. */
export interface InProcessServices {
  service<T extends DescService>(service: T, implementation: Partial<ServiceImpl<T>>): this;
}

type AnyImpl = (input: unknown, context: HandlerContext) => unknown;
type HeadersInit = ConstructorParameters<typeof Headers>[0];

const NEVER_ABORTED = new AbortController().signal;

/**
 * What a handler gets as its context. A class (not an object literal with getters), and
 * headers and context values made on first use: most handlers never look at them, and on
 * the request path these objects are made for every call.
 */
class InProcessContext implements HandlerContext {
  readonly requestMethod = "POST";
  readonly protocolName = "in-process";
  private requestHeaders: Headers | undefined;
  private responseHeaders: Headers | undefined;
  private responseTrailers: Headers | undefined;

  constructor(
    readonly method: DescMethod,
    readonly signal: AbortSignal,
    private readonly deadline: number | undefined,
    private readonly headerInit: HeadersInit | undefined,
    private contextValues: ContextValues | undefined,
  ) {}

  get service(): DescService {
    return this.method.parent;
  }
  get url(): string {
    return `in-process:/${this.method.parent.typeName}/${this.method.name}`;
  }
  get requestHeader(): Headers {
    this.requestHeaders ??= new Headers(this.headerInit);
    return this.requestHeaders;
  }
  get responseHeader(): Headers {
    this.responseHeaders ??= new Headers();
    return this.responseHeaders;
  }
  get responseTrailer(): Headers {
    this.responseTrailers ??= new Headers();
    return this.responseTrailers;
  }
  get values(): ContextValues {
    this.contextValues ??= createContextValues();
    return this.contextValues;
  }
  readonly timeoutMs = (): number | undefined => (this.deadline === undefined ? undefined : this.deadline - Date.now());
}

/** The response of a unary call; its headers are the handler's (made on first use). */
class InProcessUnaryResponse {
  readonly stream = false;
  constructor(
    readonly method: DescMethod,
    readonly message: unknown,
    private readonly context: InProcessContext,
  ) {}
  get service(): DescService {
    return this.method.parent;
  }
  get header(): Headers {
    return this.context.responseHeader;
  }
  get trailer(): Headers {
    return this.context.responseTrailer;
  }
}

/**
 * The signal a call runs under: the caller's, plus a deadline when one is given; `error`
 * turns what was thrown into the ConnectError a remote call would give.
 */
class CallSignal {
  readonly signal: AbortSignal;
  readonly deadline: number | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(signal: AbortSignal | undefined, timeoutMs: number | undefined) {
    if (timeoutMs === undefined || timeoutMs <= 0) {
      this.signal = signal ?? NEVER_ABORTED;
      return;
    }
    this.deadline = Date.now() + timeoutMs;
    const controller = new AbortController();
    this.timer = setTimeout(
      () => controller.abort(new ConnectError(`the call exceeded its deadline of ${timeoutMs} ms`, Code.DeadlineExceeded)),
      timeoutMs,
    );
    this.signal = signal === undefined ? controller.signal : AbortSignal.any([signal, controller.signal]);
  }

  error(err: unknown): ConnectError {
    if (err instanceof ConnectError) return err;
    if (this.signal.aborted && err === this.signal.reason) return ConnectError.from(err, Code.Canceled);
    return ConnectError.from(err);
  }

  /** Settles with `work`, or rejects as soon as the signal aborts (the handler may go on, as a server does after a client hangs up). */
  race<T>(work: T | Promise<T>): T | Promise<T> {
    const signal = this.signal;
    if (signal === NEVER_ABORTED || !(work instanceof Promise)) return work;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(this.error(signal.reason));
      signal.addEventListener("abort", onAbort, { once: true });
      work.then(
        (value) => {
          signal.removeEventListener("abort", onAbort);
          resolve(value);
        },
        (err: unknown) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      );
    });
  }

  cleanup(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}

/** A call with neither a signal nor a deadline (most calls between services) needs no state of its own. */
const UNBOUNDED_CALL = new CallSignal(undefined, undefined);

function callSignal(signal: AbortSignal | undefined, timeoutMs: number | undefined): CallSignal {
  return signal === undefined && (timeoutMs === undefined || timeoutMs <= 0) ? UNBOUNDED_CALL : new CallSignal(signal, timeoutMs);
}

function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return (
    value instanceof Promise || (typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function")
  );
}

/** A unary call's response once the handler has answered; ends the call (its deadline timer). */
function unaryResponse<I extends DescMessage, O extends DescMessage>(
  method: DescMethod & { input: I; output: O },
  output: unknown,
  context: InProcessContext,
  call: CallSignal,
): UnaryResponse<I, O> {
  try {
    return new InProcessUnaryResponse(method, messageOf(method.output, output) as MessageShape<O>, context) as unknown as UnaryResponse<
      I,
      O
    >;
  } catch (err) {
    throw call.error(err);
  } finally {
    call.cleanup();
  }
}

function messageOf(schema: DescMessage, value: unknown): unknown {
  return isMessage(value, schema) ? value : create(schema, value as never);
}

/**
 * A Transport that calls service implementations in this process directly: the embedded
 * mode's wiring between services. Clients and implementations are the same typed Connect
 * ones as over the network; what is left out is the wire: messages are handed over as
 * objects (never mutate a request or response you did not create), and there are no
 * interceptors. Errors, details, cancellation, deadlines, request headers and context
 * values behave as over Connect. `createRouterTransport` does the same through a full
 * protocol round trip (serialize, frame, parse), which costs some hundreds of microseconds
 * per call on this project's machines; this costs a few.
 */
export function createInProcessTransport(register: (services: InProcessServices) => void): Transport {
  const byMethod = new Map<DescMethod, AnyImpl>();
  const byName = new Map<string, AnyImpl>();
  const services: InProcessServices = {
    service(service, implementation) {
      for (const method of service.methods) {
        const fn = (implementation as Record<string, unknown>)[method.localName];
        if (typeof fn !== "function") continue;
        const bound = fn.bind(implementation) as AnyImpl;
        byMethod.set(method, bound);
        byName.set(`${service.typeName}/${method.name}`, bound);
      }
      return this;
    },
  };
  register(services);

  function lookup(method: DescMethod): AnyImpl {
    const fn = byMethod.get(method) ?? byName.get(`${method.parent.typeName}/${method.name}`);
    if (fn === undefined) throw new ConnectError(`${method.parent.typeName}.${method.name} is not implemented`, Code.Unimplemented);
    return fn;
  }

  return {
    // Not async: a handler that answers at once (without awaiting) is answered without a
    // trip through the microtask queue, and one that awaits costs one `then`.
    unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethod & { input: I; output: O },
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: unknown,
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      let call: CallSignal | undefined;
      try {
        const fn = lookup(method);
        call = callSignal(signal, timeoutMs);
        call.signal.throwIfAborted();
        const context = new InProcessContext(method, call.signal, call.deadline, header, contextValues);
        const output = call.race(fn(messageOf(method.input, input), context));
        if (!isPromiseLike(output)) return Promise.resolve(unaryResponse<I, O>(method, output, context, call));
        const running = call;
        return Promise.resolve(output).then(
          (value) => unaryResponse<I, O>(method, value, context, running),
          (err: unknown) => {
            running.cleanup();
            throw running.error(err);
          },
        );
      } catch (err) {
        call?.cleanup();
        return Promise.reject(call === undefined ? ConnectError.from(err) : call.error(err));
      }
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethod & { input: I; output: O },
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: AsyncIterable<unknown>,
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      const fn = lookup(method);
      // The handler's own signal: it also aborts when the caller stops reading early.
      const controller = new AbortController();
      const call = new CallSignal(signal, timeoutMs);
      const onAbort = () => controller.abort(call.error(call.signal.reason));
      if (call.signal.aborted) onAbort();
      else call.signal.addEventListener("abort", onAbort, { once: true });
      const context = new InProcessContext(method, controller.signal, call.deadline, header, contextValues);

      const requests = (async function* () {
        for await (const message of input) yield messageOf(method.input, message);
      })();
      let handlerInput: unknown = requests;
      if (method.methodKind === "server_streaming" || method.methodKind === "unary") {
        const first = await requests.next();
        if (first.done) throw new ConnectError("protocol error: missing request message", Code.Internal);
        handlerInput = first.value;
      }

      async function* responses() {
        let finished = false;
        try {
          controller.signal.throwIfAborted();
          const result = fn(handlerInput, context);
          if (method.methodKind === "client_streaming") {
            yield messageOf(method.output, await (result as Promise<unknown>)) as MessageShape<O>;
          } else {
            for await (const message of result as AsyncIterable<unknown>) {
              controller.signal.throwIfAborted();
              yield messageOf(method.output, message) as MessageShape<O>;
            }
          }
          finished = true;
        } catch (err) {
          finished = true;
          throw call.error(controller.signal.aborted ? controller.signal.reason : err);
        } finally {
          call.signal.removeEventListener("abort", onAbort);
          call.cleanup();
          // The caller left before the end: cancel the handler, as a closed HTTP stream would.
          if (!finished && !controller.signal.aborted) controller.abort(new ConnectError("the client cancelled the call", Code.Canceled));
        }
      }

      return {
        stream: true,
        service: method.parent,
        method,
        get header() {
          return context.responseHeader;
        },
        get trailer() {
          return context.responseTrailer;
        },
        message: responses(),
      } as StreamResponse<I, O>;
    },
  } as Transport;
}
