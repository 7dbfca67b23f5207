import { describe, expect, it } from 'vitest';
import {
  ConflictError,
  ConnectionError,
  ForbiddenError,
  GenServiceError,
  GenerationFailedError,
  IdempotencyMismatchError,
  InsufficientFundsError,
  InternalServerError,
  InvalidRequestError,
  InvalidSettingsError,
  ModelNotFoundError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  ServiceUnavailableError,
  TimeoutError,
  UnauthorizedError,
  isTransientError,
} from '../src/index.js';
import { errorFromResponse } from '../src/errors.js';
import { parseRetryAfter } from '../src/transport.js';
import { errorBody, fakeServer, json } from './helpers.js';

type ErrorClass = abstract new (...args: never[]) => GenServiceError;

// Every code core can send (packages/core/src/domain/errors.ts), with the status core gives it.
const BY_CODE: Array<[code: string, status: number, type: ErrorClass, name: string]> = [
  ['invalid_json', 400, InvalidRequestError, 'InvalidRequestError'],
  ['invalid_request', 400, InvalidRequestError, 'InvalidRequestError'],
  ['invalid_settings', 400, InvalidSettingsError, 'InvalidSettingsError'],
  ['unauthorized', 401, UnauthorizedError, 'UnauthorizedError'],
  ['insufficient_funds', 402, InsufficientFundsError, 'InsufficientFundsError'],
  ['forbidden', 403, ForbiddenError, 'ForbiddenError'],
  ['model_not_found', 404, ModelNotFoundError, 'ModelNotFoundError'],
  ['not_found', 404, NotFoundError, 'NotFoundError'],
  ['method_not_allowed', 405, InvalidRequestError, 'InvalidRequestError'],
  ['idempotency_conflict', 409, ConflictError, 'ConflictError'],
  ['payload_too_large', 413, PayloadTooLargeError, 'PayloadTooLargeError'],
  ['unsupported_media_type', 415, InvalidRequestError, 'InvalidRequestError'],
  ['idempotency_mismatch', 422, IdempotencyMismatchError, 'IdempotencyMismatchError'],
  ['rate_limited', 429, RateLimitedError, 'RateLimitedError'],
  ['internal', 500, InternalServerError, 'InternalServerError'],
  ['unavailable', 503, ServiceUnavailableError, 'ServiceUnavailableError'],
];

describe('typed errors from responses', () => {
  it.each(BY_CODE)('%s (%i) becomes %o', async (code, status, type, name) => {
    const details = [{ field: 'prompt', code: 'required', message: 'prompt is required' }];
    const { client } = fakeServer(() => json(status, errorBody(code, 'It went wrong.', details)));
    const error = await client.generations.create({ modelId: 'm' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect(error).toBeInstanceOf(GenServiceError);
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ name, status, code, message: 'It went wrong.', details });
  });

  it('maps a code by itself, whatever the status', () => {
    expect(errorFromResponse('x', { status: 400, code: 'insufficient_funds' })).toBeInstanceOf(InsufficientFundsError);
  });

  it.each([
    [400, InvalidRequestError],
    [401, UnauthorizedError],
    [402, InsufficientFundsError],
    [403, ForbiddenError],
    [404, NotFoundError],
    [409, ConflictError],
    [413, PayloadTooLargeError],
    [422, InvalidRequestError],
    [429, RateLimitedError],
    [500, InternalServerError],
    [501, InternalServerError],
    [502, ServiceUnavailableError],
    [503, ServiceUnavailableError],
    [504, ServiceUnavailableError],
  ] as Array<[number, ErrorClass]>)('maps an unknown code with status %i by status', async (status, type) => {
    const { client } = fakeServer(() => json(status, errorBody('brand_new_code')));
    const error = await client.models.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(type);
    expect(error).toMatchObject({ status, code: 'brand_new_code' });
  });

  it('maps an unknown status with an unknown code to the base class', async () => {
    const { client } = fakeServer(() => json(418, errorBody('teapot')));
    const error = await client.models.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GenServiceError);
    expect((error as Error).name).toBe('GenServiceError');
    expect(error).toMatchObject({ status: 418, code: 'teapot', details: [] });
  });

  it('copes with a body that is not the genservice shape (a proxy page)', async () => {
    const { client } = fakeServer(
      () => new Response('<html>Bad Gateway</html>', { status: 502, statusText: 'Bad Gateway' }),
    );
    const error = await client.balance().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceUnavailableError);
    expect(error).toMatchObject({ status: 502, code: 'unknown', message: 'HTTP 502 Bad Gateway' });
  });

  it('reads Retry-After (seconds and HTTP date) and X-Request-Id', async () => {
    const { client } = fakeServer(() =>
      json(429, errorBody('rate_limited'), { 'retry-after': '7', 'x-request-id': 'req-42' }),
    );
    const error = await client.balance().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitedError);
    expect(error).toMatchObject({ retryAfterMs: 7000, requestId: 'req-42' });
    const now = Date.parse('2030-01-01T00:00:00Z');
    expect(parseRetryAfter('Tue, 01 Jan 2030 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });

  it('keeps incomplete details rather than dropping them', async () => {
    const { client } = fakeServer(() =>
      json(400, { error: { code: 'invalid_settings', message: 'Bad settings.', details: [{ field: 'size' }, 'junk'] } }),
    );
    const error = (await client.generations.create({ modelId: 'm' }).catch((e: unknown) => e)) as InvalidSettingsError;
    expect(error.details).toEqual([{ field: 'size', code: 'invalid', message: '' }]);
  });

  it('a 2xx with the wrong shape is an invalid_response error, not a crash later', async () => {
    const { client } = fakeServer(() => json(200, { status: 'weird' }));
    const error = await client.generations.get('g1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GenServiceError);
    expect(error).toMatchObject({ code: 'invalid_response' });
    expect(isTransientError(error)).toBe(false);
  });

  it('a network failure is a ConnectionError carrying the cause', async () => {
    const cause = new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:1') });
    const { client } = fakeServer(() => Promise.reject(cause));
    const error = await client.balance().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionError);
    expect((error as Error).name).toBe('ConnectionError');
    expect((error as Error).cause).toBe(cause);
    expect((error as Error).message).toContain('ECONNREFUSED');
  });

  it('every class sets a literal name and takes cause through options', () => {
    const cause = new Error('root');
    expect(new NotFoundError('x', { status: 404, code: 'not_found', cause }).cause).toBe(cause);
    expect(new TimeoutError('t', { generationId: 'g', lastStatus: 'processing', cause })).toMatchObject({
      name: 'TimeoutError',
      generationId: 'g',
      lastStatus: 'processing',
      cause,
    });
    const failedError = new GenerationFailedError({ generationId: 'g', status: 'failed', price: 2 }, { cause });
    expect(failedError).toMatchObject({ name: 'GenerationFailedError', generationId: 'g', price: 2, cause });
    expect(new ConnectionError('c', { cause }).cause).toBe(cause);
  });

  it('classes which errors are transient', () => {
    const make = (status: number): GenServiceError => errorFromResponse('x', { status, code: 'c' });
    expect([408, 429, 500, 502, 503, 504].map((s) => isTransientError(make(s)))).toEqual(Array(6).fill(true));
    expect([400, 401, 402, 403, 404, 409, 413, 422].map((s) => isTransientError(make(s)))).toEqual(Array(8).fill(false));
    expect(isTransientError(new ConnectionError('x'))).toBe(true);
    expect(isTransientError(new Error('x'))).toBe(false);
  });
});
