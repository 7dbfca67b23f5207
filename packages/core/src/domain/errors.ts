/** Machine-readable error codes; the HTTP status of each is fixed in `http/errors.ts`. */
export type ErrorCode =
  | 'invalid_json'
  | 'invalid_request'
  | 'invalid_settings'
  | 'unauthorized'
  | 'insufficient_funds'
  | 'budget_exceeded'
  | 'model_not_found'
  | 'not_found'
  | 'payload_too_large'
  | 'request_timeout'
  | 'unsupported_media_type'
  | 'method_not_allowed'
  | 'idempotency_conflict'
  | 'conflict'
  | 'idempotency_mismatch'
  | 'forbidden'
  | 'rate_limited'
  | 'unavailable'
  | 'internal';

/** Every `details[].code` an error body can hold: a client can switch on them. */
export const ERROR_DETAIL_CODES = [
  'required',
  'unknown_setting',
  'invalid_type',
  'invalid_option',
  'invalid_value',
  'invalid_url',
  'too_many',
  'too_long',
  'too_many_errors',
] as const;
export type ErrorDetailCode = (typeof ERROR_DETAIL_CODES)[number];

export interface ErrorDetail {
  field: string;
  code: ErrorDetailCode;
  message: string;
}

/**
 * The errors a port or provider throws are checked with `instanceof` by core. The CommonJS builds of
 * `@genservice/core` and `@genservice/core/ports` each hold their own copy of these classes (as would two installed
 * copies of core), so besides its own instances each class also recognises the other copy's, by a brand in the global
 * symbol registry. A subclass keeps plain `instanceof` for itself.
 */
function branded(brand: symbol): (this: Function, value: unknown) => boolean {
  return function (this: Function, value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    // `brand` is the class's own static field: a subclass inherits it, but not as its own.
    return Object.hasOwn(this, 'brand') && (this as { brand?: symbol }).brand === brand && typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[brand] === true;
  };
}
const PROVIDER_ERROR = Symbol.for('@genservice/core:ProviderError');
const UNAVAILABLE_ERROR = Symbol.for('@genservice/core:UnavailableError');

/** An error the caller can act on; the HTTP layer turns it into a status and a JSON body. */
export class DomainError extends Error {
  override readonly name: string = 'DomainError';
  readonly code: ErrorCode;
  readonly details?: ErrorDetail[];
  /** For `rate_limited` and `unavailable`: the Retry-After the client gets, in seconds (default 1). */
  readonly retryAfterSeconds?: number;

  constructor(code: ErrorCode, message: string, options: { details?: ErrorDetail[]; cause?: unknown; retryAfterSeconds?: number } = {}) {
    // A DomainError is an answer to the caller, not a bug: no stack is captured for it (what that saves: bench/notes.md).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message, { cause: options.cause });
    Error.stackTraceLimit = limit;
    this.code = code;
    this.details = options.details;
    if (options.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/**
 * Thrown by a provider. `retryable: true` makes the runner try again with backoff (up to the model's attempts);
 * otherwise the generation fails at once.
 *
 * `message` is for logs only and never reaches a client. `publicMessage` is what the generation's owner reads in
 * its `error` (details view, list, webhooks); without it they read a generic sentence. `code: 'invalid_input'` says
 * the settings could not be used (a media URL that cannot be fetched, an image too large), `provider_error` (the
 * default) that the model failed.
 */
export class ProviderError extends Error {
  static readonly brand: symbol = PROVIDER_ERROR;
  static [Symbol.hasInstance] = branded(PROVIDER_ERROR);
  override readonly name = 'ProviderError' as const;
  readonly retryable: boolean;
  readonly publicMessage?: string;
  readonly code: 'provider_error' | 'invalid_input';
  /**
   * The upstream asked to wait this long before the next request (a 429's `Retry-After`, in ms). The provider's lane
   * pauses for that long on every instance and the generation waits for it, without spending one of its attempts.
   */
  readonly retryAfterMs?: number;

  constructor(
    message: string,
    options: { retryable?: boolean; publicMessage?: string; code?: 'provider_error' | 'invalid_input'; cause?: unknown; retryAfterMs?: number } = {},
  ) {
    super(message, { cause: options.cause });
    this.retryable = options.retryable ?? false;
    if (options.retryAfterMs !== undefined && Number.isFinite(options.retryAfterMs) && options.retryAfterMs >= 0) this.retryAfterMs = options.retryAfterMs;
    this.code = options.code ?? 'provider_error';
    if (options.publicMessage !== undefined) this.publicMessage = String(options.publicMessage).slice(0, 500);
    Object.defineProperty(this, PROVIDER_ERROR, { value: true });
  }
}

/** Thrown by a port when its backing service cannot be reached (answered as 503). */
export class UnavailableError extends Error {
  static readonly brand: symbol = UNAVAILABLE_ERROR;
  static [Symbol.hasInstance] = branded(UNAVAILABLE_ERROR);
  override readonly name = 'UnavailableError' as const;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    Object.defineProperty(this, UNAVAILABLE_ERROR, { value: true });
  }
}
