/**
 * The Node request handler a host mounts at `<mount>/mcp`: MCP over Streamable HTTP, stateless (a server and a
 * transport per request; all state is the service's), with a session id issued at `initialize` only to tell one
 * client's JSON-RPC ids from another's (they make the Idempotency-Key of a tool call).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { GenerationService } from '@genservice/core';
import { readRawBody, writeNodeResponse } from '@genservice/core/adapter';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { Api, discard } from './api.js';
import { type McpHandlerOptions, type ResolvedMcpOptions, resolveOptions } from './options.js';
import { createExchangeServer, InFlightCalls } from './server.js';
import { SettingsSchemas } from './tools.js';

/**
 * A Node `(req, res)` handler. Resolves when the answer is written. A third argument (Express's `next`) is ignored:
 * every request reaching it is answered. A body a host parser already read is taken from `req.body`.
 */
export type McpHandler = (req: IncomingMessage, res: ServerResponse, next?: unknown) => Promise<void>;

/** What the handler shares across requests: nothing of a user or a session. */
interface Shared {
  service: GenerationService;
  options: ResolvedMcpOptions;
  schemas: SettingsSchemas;
  inFlight: InFlightCalls;
  validator: () => jsonSchemaValidator;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A JSON-RPC error answered by the HTTP layer itself (no message was read: `id` is null). */
function rpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers }).end(body);
}

/** A session id as a client may echo it: visible ASCII (MCP's rule), of a sane length. */
const SESSION_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * Deepest nesting of objects and arrays a message may have: far beyond any tool's arguments (settings are strings and
 * lists of them), well inside what `JSON.stringify` can write back to the API without overflowing the stack.
 */
const MAX_MESSAGE_DEPTH = 64;

/** Whether a parsed message nests deeper than `max`; measured without recursion, so a hostile body cannot overflow it. */
function deeperThan(message: unknown, max: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value: message, depth: 1 }];
  // Each node of the parsed body is visited once: the loop ends after as many steps as the body has values.
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!;
    if (depth > max) return true;
    for (const child of Object.values(value as object)) {
      if (child !== null && typeof child === 'object') stack.push({ value: child, depth: depth + 1 });
    }
  }
  return false;
}

function isInitialize(message: unknown): boolean {
  return typeof message === 'object' && message !== null && (message as { method?: unknown }).method === 'initialize';
}

async function serve(shared: Shared, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { service, options } = shared;
  const authorization = header(req, 'authorization');
  const trace: Record<string, string> = {};
  for (const name of ['traceparent', 'tracestate']) {
    const v = header(req, name);
    if (v !== undefined) trace[name] = v;
  }
  const origin = (): string => `${(req.socket as TLSSocket | undefined)?.encrypted ? 'https' : 'http'}://${header(req, 'host') ?? 'localhost'}`;
  const api = new Api(service, {
    authorization,
    trace,
    baseUrl: options.publicUrl ?? (() => `${origin()}${options.apiPrefix}`),
    remoteAddress: options.remoteAddress(req),
  });

  // The key first, as the API checks it: a missing or wrong one (or a rate-limited client) gets the API's own answer,
  // 401 with WWW-Authenticate, before any MCP message is read or any session exists.
  const check = await api.send('GET', '/v1/balance');
  if (check.status !== 200) {
    await writeNodeResponse(res, check);
    return;
  }
  await discard(check.body);

  // Only POST carries messages: no standalone SSE stream (every notification rides on its request's own stream), and
  // no session to delete (there is none on the server).
  if (req.method !== 'POST') {
    req.resume();
    rpcError(res, 405, -32000, 'Method not allowed: this MCP endpoint takes POST only.', { allow: 'POST' });
    return;
  }

  let parsed = (req as { body?: unknown }).body;
  if (parsed === undefined) {
    const raw = await readRawBody(req, options.maxBodyBytes, req.headers['content-length'], service.bodyTimeoutMs);
    if (raw === null) return rpcError(res, 413, -32000, `The request body is larger than ${options.maxBodyBytes} bytes.`, { connection: 'close' });
    if (raw === 'timeout') return rpcError(res, 408, -32000, 'The request body did not arrive in time.', { connection: 'close' });
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      return rpcError(res, 400, -32700, 'Parse error: Invalid JSON');
    }
  }

  if (parsed !== null && typeof parsed === 'object' && deeperThan(parsed, MAX_MESSAGE_DEPTH)) {
    return rpcError(res, 400, -32600, `Invalid Request: the message is nested more than ${MAX_MESSAGE_DEPTH} levels deep.`);
  }

  const initializing = Array.isArray(parsed) ? parsed.some(isInitialize) : isInitialize(parsed);
  let sessionId = header(req, 'mcp-session-id');
  if (sessionId !== undefined && !SESSION_ID.test(sessionId)) sessionId = undefined;
  if (initializing) {
    sessionId = randomUUID();
    res.setHeader('mcp-session-id', sessionId);
  }

  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  const server = createExchangeServer({
    service,
    api,
    options,
    schemas: shared.schemas,
    inFlight: shared.inFlight,
    validator: shared.validator(),
    authorization,
    sessionId,
  });
  // Transport and protocol trouble (a client's bad Accept header, a malformed message): the client is told; the log
  // hears it at debug level.
  server.onerror = (err) => options.logger?.debug({ err }, 'MCP transport or protocol error');
  // The client going away (or the answer being complete) ends this request's server: its handlers' signals abort,
  // which stops what they wait on and releases their event streams.
  res.on('close', () => {
    void server.close().catch(() => undefined);
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, parsed);
}

/**
 * The MCP endpoint of a service, as a Node handler to mount at `<mount>/mcp` (see docs/mcp.md for Express, Fastify
 * and Koa). Every request needs the user's API key as `Authorization: Bearer`.
 */
export function createMcpHandler(service: GenerationService, options: McpHandlerOptions = {}): McpHandler {
  if (!service || typeof service.handle !== 'function') throw new TypeError('createMcpHandler: the first argument must be a GenerationService');
  let validator: jsonSchemaValidator | undefined;
  const shared: Shared = {
    service,
    options: resolveOptions(options),
    schemas: new SettingsSchemas(service),
    inFlight: new InFlightCalls(),
    // Only the SDK's client-facing requests (elicitation) validate with it, which this server never sends: made once.
    validator: () => (validator ??= new AjvJsonSchemaValidator()),
  };
  return async function mcp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await serve(shared, req, res);
    } catch (err) {
      shared.options.logger?.error({ err: err instanceof Error ? err : new Error(String(err)), method: req.method }, 'MCP request failed');
      if (!res.headersSent) rpcError(res, 500, -32603, 'Internal error');
      else res.destroy();
    }
  };
}
