/** Options of `createMcpHandler`, and their defaults. */
import type { Logger } from '@genservice/core';

/** Images and audio up to this many bytes come inline (base64) in a tool result; larger ones as a link. */
export const DEFAULT_INLINE_MAX_BYTES = 1024 * 1024;
/** The `pollInterval` a task suggests to its client. */
export const DEFAULT_TASK_POLL_INTERVAL_MS = 2000;
/** Generations per page of `resources/list` and `tasks/list`. */
export const DEFAULT_PAGE_SIZE = 50;
/** Most bytes of one MCP request body (a JSON-RPC message or batch). */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface McpHandlerOptions {
  /**
   * The public base URL of the mounted API (where `<mount>/v1` is served), e.g. `https://api.example.com/gen`. Only
   * used to build file URLs when the service itself has no `publicUrl` and has `trustRequestHost` set. Default: the
   * request's own origin (`Host`, and `X-Forwarded-Proto` behind a proxy that sets it) plus `apiPrefix`.
   */
  publicUrl?: string;
  /** Where the API is mounted on this host (`/gen`), for the default of `publicUrl`. Default `''`. */
  apiPrefix?: string;
  /**
   * Largest image or audio result (in bytes, before base64) that a tool result carries inline as `image` / `audio`
   * content; a larger one is a `resource_link` to its signed URL. Default 1 MiB; 0 always links.
   */
  inlineMaxBytes?: number;
  /** `pollInterval` of every task (ms): how often a client is asked to poll `tasks/get`. Default 2000. */
  taskPollIntervalMs?: number;
  /** Generations per page of `resources/list` and `tasks/list` (1 to 100). Default 50. */
  pageSize?: number;
  /** Largest MCP request body in bytes; a larger one gets 413. Default 4 MiB. */
  maxBodyBytes?: number;
  /** `serverInfo` of the MCP `initialize` answer. Default `{ name: 'genservice', version: <this package's> }`. */
  serverInfo?: { name: string; version: string; title?: string };
  /** `instructions` of the MCP `initialize` answer: how the host would like agents to use its tools. */
  instructions?: string;
  /**
   * The client's address, when the host knows it better than the socket does (behind a proxy: Express's `req.ip`).
   * Keys the API's rate limit of requests without a valid key. Default: the socket's remote address.
   */
  remoteAddress?: (req: import('node:http').IncomingMessage) => string | undefined;
  /**
   * Where an unexpected failure of the handler itself is logged (pino-compatible; the service's own answers are logged
   * by the service). Default: none.
   */
  logger?: Logger;
}

export interface ResolvedMcpOptions {
  publicUrl?: string;
  apiPrefix: string;
  inlineMaxBytes: number;
  taskPollIntervalMs: number;
  pageSize: number;
  maxBodyBytes: number;
  serverInfo: { name: string; version: string; title?: string };
  instructions?: string;
  remoteAddress: (req: import('node:http').IncomingMessage) => string | undefined;
  logger?: Logger;
}

export const PACKAGE_VERSION = '0.1.0';

function wholeNumber(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) throw new RangeError(`createMcpHandler: ${name} must be a whole number from ${min} to ${max}, got ${value}`);
  return value;
}

export function resolveOptions(options: McpHandlerOptions = {}): ResolvedMcpOptions {
  const publicUrl = options.publicUrl?.replace(/\/+$/, '');
  if (publicUrl !== undefined && !/^https?:\/\/[^/]+/i.test(publicUrl)) throw new RangeError(`createMcpHandler: publicUrl must be an absolute http(s) URL, got ${options.publicUrl}`);
  const apiPrefix = (options.apiPrefix ?? '').replace(/\/+$/, '');
  if (apiPrefix !== '' && !apiPrefix.startsWith('/')) throw new RangeError(`createMcpHandler: apiPrefix must start with "/", got ${options.apiPrefix}`);
  return {
    ...(publicUrl !== undefined ? { publicUrl } : {}),
    apiPrefix,
    inlineMaxBytes: wholeNumber('inlineMaxBytes', options.inlineMaxBytes, DEFAULT_INLINE_MAX_BYTES, 0, 64 * 1024 * 1024),
    taskPollIntervalMs: wholeNumber('taskPollIntervalMs', options.taskPollIntervalMs, DEFAULT_TASK_POLL_INTERVAL_MS, 10, 3_600_000),
    pageSize: wholeNumber('pageSize', options.pageSize, DEFAULT_PAGE_SIZE, 1, 100),
    maxBodyBytes: wholeNumber('maxBodyBytes', options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES, 1024, 1024 * 1024 * 1024),
    serverInfo: options.serverInfo ?? { name: 'genservice', version: PACKAGE_VERSION },
    ...(options.instructions !== undefined ? { instructions: options.instructions } : {}),
    remoteAddress: options.remoteAddress ?? ((req) => req.socket?.remoteAddress),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
  };
}
