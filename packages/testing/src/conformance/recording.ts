import type { GenerationService, HttpRequest, HttpResponse } from '@genservice/core';

export interface RecordingService {
  /** Only `handle`, `bodyLimit`, `bodyTimeoutMs`, `servesOpenAi` and `servesConsole` (false) work; anything else throws. Enough to test what an adapter translates. */
  service: GenerationService;
  /** Every request the adapter handed to `handle`, in order. */
  requests: HttpRequest[];
  /** The last of them. */
  last(): HttpRequest;
}

/**
 * A stand-in service that records each `HttpRequest` and answers with `respond(request)`: by default a 200 JSON
 * echo of what it got (body bytes as base64), so a test sees exactly what the adapter passed on.
 */
export function createRecordingService(
  options: { bodyLimit?: number; bodyTimeoutMs?: number; respond?: (request: HttpRequest) => HttpResponse | Promise<HttpResponse> } = {},
): RecordingService {
  const requests: HttpRequest[] = [];
  const respond = options.respond ?? echo;
  const service = new Proxy(
    {
      bodyLimit: options.bodyLimit ?? 1024 * 1024,
      bodyTimeoutMs: options.bodyTimeoutMs ?? 30_000,
      servesOpenAi: false,
      servesConsole: false,
      async handle(request: HttpRequest): Promise<HttpResponse> {
        // Recorded with the base URL the adapter would give core when asked, so tests compare strings.
        const seen = typeof request.baseUrl === 'function' ? { ...request, baseUrl: request.baseUrl() } : request;
        requests.push(seen);
        return respond(seen);
      },
    },
    {
      get(target, prop, receiver) {
        if (prop in target || typeof prop === 'symbol' || prop === 'then') return Reflect.get(target, prop, receiver);
        throw new Error(`the recording service has no ${String(prop)}`);
      },
    },
  ) as unknown as GenerationService;
  return {
    service,
    requests,
    last() {
      const r = requests.at(-1);
      if (!r) throw new Error('the adapter handed no request to the service');
      return r;
    },
  };
}

/** What the default recording answer holds. */
export interface EchoedRequest {
  method: string;
  path: string;
  baseUrl?: string;
  headers: HttpRequest['headers'];
  /** `body` as base64, when it was bytes. */
  bodyBase64?: string;
  /** `body`, when it was a string. */
  bodyText?: string;
  parsedBody?: unknown;
  bodyError?: string;
}

function echo(request: HttpRequest): HttpResponse {
  const out: EchoedRequest = { method: request.method, path: request.path, baseUrl: request.baseUrl as string | undefined, headers: request.headers };
  if (typeof request.body === 'string') out.bodyText = request.body;
  else if (request.body !== undefined) out.bodyBase64 = Buffer.from(request.body).toString('base64');
  if (request.parsedBody !== undefined) out.parsedBody = request.parsedBody;
  if (request.bodyError !== undefined) out.bodyError = request.bodyError;
  return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(out) };
}
