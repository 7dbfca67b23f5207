/** Reading the service's event stream (`GET /v1/generations/{id}/events`, an async iterable of SSE chunks). */
import { createParser, type EventSourceMessage } from 'eventsource-parser';

/**
 * The messages of an SSE body, one at a time. Ends with the body, or at once when `signal` aborts; either way the
 * body's iterator is returned, which releases what the service holds for the stream.
 */
export async function* sseMessages(body: AsyncIterable<string | Uint8Array>, signal: AbortSignal): AsyncGenerator<EventSourceMessage> {
  const it = body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => queue.push(message) });
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    if (signal.aborted) resolve('aborted');
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    for (;;) {
      while (queue.length > 0) yield queue.shift()!;
      const next = await Promise.race([it.next(), aborted]);
      if (next === 'aborted' || next.done) return;
      parser.feed(typeof next.value === 'string' ? next.value : decoder.decode(next.value, { stream: true }));
    }
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
    await it.return?.();
  }
}
