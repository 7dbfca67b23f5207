import type { ServerResponse } from 'node:http';
import type { HttpResponse } from '../http/types.js';

function isStream(body: HttpResponse['body']): body is AsyncIterable<string | Uint8Array> {
  return typeof body === 'object' && body !== null && !(body instanceof Uint8Array) && Symbol.asyncIterator in body;
}

/** Whether core's answer must be written by hand rather than by the framework: a live stream, or a HEAD's headers. */
export function needsNodeWrite(out: HttpResponse, method: string): boolean {
  return isStream(out.body) || method.toUpperCase() === 'HEAD';
}

/**
 * Writes core's answer to a Node response exactly as core made it: status, headers (a HEAD keeps the Content-Length of
 * the GET), and the body. A live stream is written chunk by chunk with backpressure; when the client goes away the
 * stream's iterator is told to stop (`return()`), which releases everything it holds. Shared by every adapter, so
 * streams end the same way on each.
 */
export function writeNodeResponse(res: ServerResponse, out: HttpResponse): Promise<void> {
  res.statusCode = out.status;
  for (const [name, value] of Object.entries(out.headers)) res.setHeader(name, value);
  const body = out.body;
  if (!isStream(body)) {
    res.end(body);
    return Promise.resolve();
  }
  return pipe(res, body);
}

async function pipe(res: ServerResponse, body: AsyncIterable<string | Uint8Array>): Promise<void> {
  const it = body[Symbol.asyncIterator]();
  let gone = false;
  let unblock: (() => void) | undefined;
  const onClose = (): void => {
    if (res.writableFinished) return;
    gone = true;
    unblock?.();
    void it.return?.();
  };
  res.on('close', onClose);
  // Gone before this began (it left while the answer was made): its 'close' came before the listener, and a write
  // would wait for a 'drain' that never comes.
  if (res.destroyed) onClose();
  // Headers now: a client waiting for the first event must see the stream has begun.
  res.flushHeaders();
  try {
    while (!gone) {
      const r = await it.next();
      if (r.done || gone) break;
      if (!res.write(r.value)) {
        await new Promise<void>((resolve) => {
          unblock = resolve;
          res.once('drain', resolve);
        });
        res.off('drain', unblock!);
        unblock = undefined;
        if (gone) break;
      }
    }
  } catch {
    // A stream that failed mid-way can only be cut: the status was sent with the headers.
    gone = true;
    await it.return?.();
    res.destroy();
    return;
  } finally {
    res.off('close', onClose);
  }
  if (gone) await it.return?.();
  else res.end();
}

/** The body of an answer that is not written by hand (`needsNodeWrite` is false), as a framework sends it. */
export function nodeBody(out: HttpResponse): string | Buffer {
  const body = out.body as string | Uint8Array;
  return typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
