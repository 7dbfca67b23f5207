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

/**
 * Sends half of a declared body on a raw socket, then ends the connection (an adapter must give up and go on).
 * Resolves once the server has closed its side too: by then it has seen the body end short and reacted to it.
 */
export async function disconnectMidBody(url: string, timeoutMs = 10_000): Promise<void> {
  const { hostname, port, pathname } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`disconnectMidBody: the server did not close the connection within ${timeoutMs} ms after the client ended it`));
    }, timeoutMs);
    // Whatever the server answers (if anything) is read and dropped; the close is what is awaited.
    socket.on('data', () => undefined);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.once('error', () => socket.destroy());
    socket.once('connect', () => {
      // TCP keeps the order: the server gets the head and half the body, then the end of the stream.
      socket.end(`POST ${pathname} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"modelId":`);
    });
  });
}

/** What a raw exchange on one socket gave: the status line's code, the headers, the body text, and whether the server closed. */
export interface RawReply {
  status: number;
  headers: Record<string, string>;
  text: string;
  closedByServer: boolean;
}

/**
 * Sends `head` (request line and headers, without the blank line) and then `body` on a fresh socket, and reads the
 * answer until the server closes or `waitMs` passes. For what fetch cannot send: a body that stops part-way, a
 * declared Content-Length that never arrives.
 */
export async function rawExchange(baseUrl: string, head: string, body: string | Buffer = '', waitMs = 10_000): Promise<RawReply> {
  const { Socket } = await import('node:net');
  const url = new URL(baseUrl);
  return new Promise<RawReply>((resolve, reject) => {
    const socket = new Socket();
    const chunks: Buffer[] = [];
    let closedByServer = false;
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      const all = Buffer.concat(chunks).toString('latin1');
      const end = all.indexOf('\r\n\r\n');
      const lines = (end === -1 ? all : all.slice(0, end)).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({ status: Number(lines[0]?.split(' ')[1] ?? 0), headers, text: end === -1 ? '' : Buffer.from(all.slice(end + 4), 'latin1').toString('utf8'), closedByServer });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (d) => chunks.push(d));
    socket.on('end', () => {
      closedByServer = true;
      finish();
    });
    socket.on('error', (err) => (chunks.length > 0 ? finish() : reject(err)));
    socket.connect(Number(url.port), url.hostname, () => {
      socket.write(`${head}\r\nHost: ${url.host}\r\n\r\n`);
      if (body.length > 0) socket.write(body);
    });
  });
}
