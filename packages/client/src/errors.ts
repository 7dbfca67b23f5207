import type { ErrorDetail, FailedGeneration, FailureReason, GenerationStatus } from './types.js';

/** Error codes a genservice server sends today. Others may appear later; they map by HTTP status. */
export type KnownErrorCode =
  | 'invalid_json'
  | 'invalid_request'
  | 'invalid_settings'
  | 'unauthorized'
  | 'forbidden'
  | 'insufficient_funds'
  | 'model_not_found'
  | 'not_found'
  | 'method_not_allowed'
  | 'idempotency_conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'idempotency_mismatch'
  | 'rate_limited'
  | 'unavailable'
  | 'internal';

/**
 * `unknown` when the error body was not the genservice shape (a proxy's HTML page, an empty 502, ...);
 * `invalid_response` when a 2xx body did not have the documented shape.
 */
// `string & {}` keeps editor completion for the known codes while allowing codes from newer servers.
export type ErrorCode = KnownErrorCode | 'unknown' | 'invalid_response' | (string & {});

export interface GenServiceErrorOptions {
  /** HTTP status of the response. */
  status: number;
  code: ErrorCode;
  details?: ErrorDetail[];
  /** From a `Retry-After` header, in milliseconds. */
  retryAfterMs?: number;
  /** From an `X-Request-Id` header, for support requests. */
  requestId?: string;
  cause?: unknown;
}

/** The server answered with an error status. Subclasses narrow it by error code; catch this one for all of them. */
export class GenServiceError extends Error {
  override readonly name: string = 'GenServiceError';
  readonly status: number;
  readonly code: ErrorCode;
  /** Per-field problems; `invalid_settings` lists every bad setting here. Empty when the server sent none. */
  readonly details: ErrorDetail[];
  readonly retryAfterMs?: number;
  readonly requestId?: string;

  constructor(message: string, options: GenServiceErrorOptions) {
    super(message, { cause: options.cause });
    this.status = options.status;
    this.code = options.code;
    this.details = options.details ?? [];
    this.retryAfterMs = options.retryAfterMs;
    this.requestId = options.requestId;
  }
}

/** 400 `invalid_json` / `invalid_request` (also 405 and 415, which mean the request itself was malformed). */
export class InvalidRequestError extends GenServiceError {
  override readonly name = 'InvalidRequestError' as const;
}

/** 400 `invalid_settings`: `details` holds one entry per bad setting (genservice names it `settings.<name>`). */
export class InvalidSettingsError extends GenServiceError {
  override readonly name = 'InvalidSettingsError' as const;
}

/** 401: the API key is missing, unknown or revoked. */
export class UnauthorizedError extends GenServiceError {
  override readonly name = 'UnauthorizedError' as const;
}

/** 403: the key is valid but may not do this. */
export class ForbiddenError extends GenServiceError {
  override readonly name = 'ForbiddenError' as const;
}

/** 402: the balance cannot cover the model's price. */
export class InsufficientFundsError extends GenServiceError {
  override readonly name = 'InsufficientFundsError' as const;
}

/** 404 `model_not_found`: the modelId is unknown or unavailable. */
export class ModelNotFoundError extends GenServiceError {
  override readonly name = 'ModelNotFoundError' as const;
}

/** 404 `not_found`: no such generation, or it belongs to another user (the server does not say which). */
export class NotFoundError extends GenServiceError {
  override readonly name = 'NotFoundError' as const;
}

/** 413: the request body is larger than the server accepts. */
export class PayloadTooLargeError extends GenServiceError {
  override readonly name = 'PayloadTooLargeError' as const;
}

/** 429: see `retryAfterMs`. */
export class RateLimitedError extends GenServiceError {
  override readonly name = 'RateLimitedError' as const;
}

/** 409 `idempotency_conflict`: a request with the same Idempotency-Key is still being handled; retry later. */
export class ConflictError extends GenServiceError {
  override readonly name = 'ConflictError' as const;
}

/** 422 `idempotency_mismatch`: the Idempotency-Key was already used with a different body. */
export class IdempotencyMismatchError extends GenServiceError {
  override readonly name = 'IdempotencyMismatchError' as const;
}

/** 502/503/504: the server or something it depends on is unreachable for now. */
export class ServiceUnavailableError extends GenServiceError {
  override readonly name = 'ServiceUnavailableError' as const;
}

/** Any other 5xx. */
export class InternalServerError extends GenServiceError {
  override readonly name = 'InternalServerError' as const;
}

/**
 * No HTTP response at all: DNS, refused or reset connection, CORS rejection in a browser, or no answer within
 * the client's `requestTimeoutMs`. Not a GenServiceError because there is no status or code to report.
 */
export class ConnectionError extends Error {
  override readonly name = 'ConnectionError' as const;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
  }
}

/**
 * `waitFor`/`run` did not see a terminal status within `timeoutMs`. The generation itself goes on (and is
 * charged) on the server unless it is cancelled; `generationId` is there to poll or cancel it later
 * (undefined when `run` timed out before the create went through). `cause` is the last error, if the last
 * attempt failed.
 */
export class TimeoutError extends Error {
  override readonly name = 'TimeoutError' as const;
  readonly generationId?: string;
  readonly lastStatus?: GenerationStatus;

  constructor(
    message: string,
    options: { generationId?: string; lastStatus?: GenerationStatus; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.generationId = options.generationId;
    this.lastStatus = options.lastStatus;
  }
}

/** Thrown by `run` when the generation ends `failed` (unless `throwOnFailure: false`). A failure can still cost `price`. */
export class GenerationFailedError extends Error {
  override readonly name = 'GenerationFailedError' as const;
  readonly generationId: string;
  readonly price: number;
  readonly generation: FailedGeneration;
  /** Why it failed (`code` and a message safe to show the user), when the service said. */
  readonly error?: FailureReason;

  constructor(generation: FailedGeneration, options: { cause?: unknown } = {}) {
    super(
      `Generation ${generation.generationId} failed (price ${generation.price})${generation.error ? `: ${generation.error.message}` : '.'}`,
      { cause: options.cause },
    );
    this.generationId = generation.generationId;
    this.price = generation.price;
    this.generation = generation;
    if (generation.error) this.error = generation.error;
  }
}

type ErrorClass = new (message: string, options: GenServiceErrorOptions) => GenServiceError;

const BY_CODE: Record<KnownErrorCode, ErrorClass> = {
  invalid_json: InvalidRequestError,
  invalid_request: InvalidRequestError,
  method_not_allowed: InvalidRequestError,
  unsupported_media_type: InvalidRequestError,
  invalid_settings: InvalidSettingsError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  insufficient_funds: InsufficientFundsError,
  model_not_found: ModelNotFoundError,
  not_found: NotFoundError,
  payload_too_large: PayloadTooLargeError,
  rate_limited: RateLimitedError,
  idempotency_conflict: ConflictError,
  idempotency_mismatch: IdempotencyMismatchError,
  unavailable: ServiceUnavailableError,
  internal: InternalServerError,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidRequestError,
  401: UnauthorizedError,
  402: InsufficientFundsError,
  403: ForbiddenError,
  404: NotFoundError,
  405: InvalidRequestError,
  409: ConflictError,
  413: PayloadTooLargeError,
  415: InvalidRequestError,
  // An unknown 422 code is some other semantic rejection of the request, not necessarily an idempotency one.
  422: InvalidRequestError,
  429: RateLimitedError,
  502: ServiceUnavailableError,
  503: ServiceUnavailableError,
  504: ServiceUnavailableError,
};

/** Builds the typed error for an error response: by `code` when it is known, else by HTTP status. */
export function errorFromResponse(message: string, options: GenServiceErrorOptions): GenServiceError {
  const byCode = Object.prototype.hasOwnProperty.call(BY_CODE, options.code)
    ? BY_CODE[options.code as KnownErrorCode]
    : undefined;
  const ErrorType =
    byCode ?? BY_STATUS[options.status] ?? (options.status >= 500 ? InternalServerError : GenServiceError);
  return new ErrorType(message, options);
}

/**
 * Errors worth retrying while waiting: no response, 408, 429 and 5xx. Everything else (401, 404, ...) will not
 * change by asking again.
 */
export function isTransientError(error: unknown): boolean {
  if (error instanceof ConnectionError) return true;
  if (error instanceof GenServiceError) {
    if (error.code === 'invalid_response') return false;
    return error.status === 408 || error.status === 429 || error.status >= 500;
  }
  return false;
}
