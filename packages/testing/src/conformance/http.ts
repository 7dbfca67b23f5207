import { createServer, type RequestListener } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { MountedServer } from './types.js';

/** A response read whole, so assertions never race the stream. */
export interface Reply {
  status: number;
  headers: Headers;
  contentType: string;
  bytes: Buffer;
  text: string;
  /** The parsed JSON body, or undefined when the body is not JSON. */
  // Test code reads arbitrary response shapes; `any` keeps every assertion free of casts.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  /** Sent as is: a string, bytes (no Content-Type added by fetch) or a stream (sent chunked). */
  body?: string | Uint8Array | ReadableStream<Uint8Array>;
  /** Serialised with JSON.stringify and sent as application/json. */
  json?: unknown;
}

export async function call(url: string, options: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  let body: string | Uint8Array | ReadableStream<Uint8Array> | undefined = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  }
  const init: RequestInit & { duplex?: 'half' } = { method: options.method ?? 'GET', headers, body: body as BodyInit | undefined, redirect: 'manual' };
  if (body instanceof ReadableStream) init.duplex = 'half';
  const res = await fetch(url, init);
  const bytes = Buffer.from(await res.arrayBuffer());
  const text = bytes.toString('utf8');
  let parsed: unknown;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, contentType: res.headers.get('content-type') ?? '', bytes, text, body: parsed };
}

/** A body sent with Transfer-Encoding: chunked (no Content-Length), in pieces of `chunk` bytes. */
export function chunkedBody(data: string | Uint8Array, chunk = 16 * 1024): ReadableStream<Uint8Array> {
  const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.byteLength) {
        controller.close();
        return;
      }
      controller.enqueue(bytes.slice(offset, offset + chunk));
      offset += chunk;
    },
  });
}

/**
 * Serves a Node request listener (an Express app, `koaApp.callback()`) on 127.0.0.1 at a free port, for a
 * `MountFn`. `prefix` is appended to the returned baseUrl.
 */
export async function listen(listener: RequestListener, prefix = ''): Promise<MountedServer> {
  const server = createServer(listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${prefix}`,
    close: () =>
      new Promise<void>((resolve) => {
        // Keep-alive sockets from fetch would otherwise hold close() open.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Sends half of a declared body on a raw socket, then drops the connection (an adapter must give up and go on). */
export async function disconnectMidBody(url: string): Promise<void> {
  const { hostname, port, pathname } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(`POST ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"modelId":`);
  await new Promise((resolve) => setTimeout(resolve, 50));
  socket.destroy();
  await new Promise((resolve) => setTimeout(resolve, 50));
}
