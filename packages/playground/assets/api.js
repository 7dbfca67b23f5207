// The page's only way to the service: its public HTTP API, with the caller's key as a Bearer token.

/**
 * Where the API lives: the mount point above `<mount>/playground/`, on the page's own origin, and nowhere else. The
 * page holds the caller's key: a URL that could point it at another origin (a `?api=` parameter, as it once had)
 * would hand that key to whoever sent the link.
 * @param {Location} location
 * @returns {URL}
 */
export function apiBase(location) {
  return new URL('../', location.href);
}

/**
 * The value as an absolute http(s) URL, or null: only these become links or media sources, so a result such as
 * `javascript:...` is shown as text and never made clickable.
 * @param {unknown} value
 * @returns {string | null}
 */
export function httpUrl(value) {
  if (typeof value !== 'string') return null;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * @typedef {{ ok: boolean, status: number, data: any, error: { code: string, message: string, details?: Array<{ field: string, code: string, message: string }> } | null, headers: Headers }} ApiAnswer
 */

export class Api {
  /** @param {URL} base @param {() => string} key */
  constructor(base, key) {
    this.base = base;
    this.key = key;
  }

  /** @param {string} path below the mount, e.g. `v1/models` */
  url(path) {
    return new URL(path, this.base).href;
  }

  /**
   * @param {string} method
   * @param {string} path
   * @param {{ body?: unknown, headers?: Record<string, string>, signal?: AbortSignal }} [options]
   * @returns {Promise<ApiAnswer>}
   */
  async request(method, path, options = {}) {
    const headers = { authorization: `Bearer ${this.key()}`, ...options.headers };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    let res;
    try {
      res = await fetch(this.url(path), {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: options.signal,
        cache: 'no-store',
      });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      return { ok: false, status: 0, data: null, error: { code: 'network', message: 'The service could not be reached.' }, headers: new Headers() };
    }
    let data = null;
    const text = await res.text();
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    const error = res.ok
      ? null
      : (data && typeof data.error === 'object' && data.error) || { code: `http_${res.status}`, message: `The service answered ${res.status}.` };
    return { ok: res.ok, status: res.status, data, error, headers: res.headers };
  }

  /**
   * `POST v1/uploads`: the file as the raw body with its own type; answers `{ id, url, expiresAt }` as `data`.
   * @param {File} file
   * @returns {Promise<ApiAnswer>}
   */
  async upload(file) {
    let res;
    try {
      res = await fetch(this.url('v1/uploads'), {
        method: 'POST',
        headers: { authorization: `Bearer ${this.key()}`, 'content-type': file.type || 'application/octet-stream' },
        body: file,
        cache: 'no-store',
      });
    } catch {
      return { ok: false, status: 0, data: null, error: { code: 'network', message: 'The service could not be reached.' }, headers: new Headers() };
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    const error = res.ok ? null : (data && typeof data.error === 'object' && data.error) || { code: `http_${res.status}`, message: `The service answered ${res.status}.` };
    return { ok: res.ok, status: res.status, data, error, headers: res.headers };
  }

  /**
   * Follows a generation's event stream (`GET v1/generations/:id/events`, read with fetch because it needs the
   * Authorization header). Calls `onEvent(name, data)` per event (a state's data is the item; `output` and `preview`
   * carry partial output: `{ delta }`, `{ url, mimeType }`); resolves `true` when the stream ended after a
   * terminal event, `false` when the stream is not available or broke off (the caller then polls).
   * @param {string} id
   * @param {(name: string, item: any) => void} onEvent
   * @param {AbortSignal} signal
   * @returns {Promise<boolean>}
   */
  async follow(id, onEvent, signal) {
    let lastId = null;
    let finished = false;
    // A stream that breaks off is resumed from its last event (Last-Event-ID) a few times before giving up.
    for (let attempt = 0; attempt < 3 && !finished; attempt++) {
      let res;
      try {
        res = await fetch(this.url(`v1/generations/${encodeURIComponent(id)}/events`), {
          headers: { authorization: `Bearer ${this.key()}`, accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
          signal,
          cache: 'no-store',
        });
      } catch {
        if (signal.aborted) return false;
        continue;
      }
      if (!res.ok || !res.body || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return false;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, '\n');
          let end;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const message = parseEvent(block);
            if (!message) continue;
            if (message.id) lastId = message.id;
            let item;
            try {
              item = JSON.parse(message.data);
            } catch {
              continue;
            }
            onEvent(message.event, item);
            if ((message.event === 'completed' || message.event === 'failed') && item && (item.status === 'completed' || item.status === 'failed')) finished = true;
          }
        }
      } catch {
        if (signal.aborted) return false;
      }
    }
    return finished;
  }
}

/**
 * One message of a `text/event-stream` (the WHATWG format): `event:`, `data:` (lines joined), `id:`; comments skipped.
 * @param {string} block
 * @returns {{ event: string, data: string, id: string | null } | null}
 */
export function parseEvent(block) {
  let event = 'message';
  const data = [];
  let id = null;
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
  }
  return data.length ? { event, data: data.join('\n'), id } : null;
}

/** A fresh Idempotency-Key per press of Generate, so a retried request never starts (or charges) twice. */
export function idempotencyKey() {
  return crypto.randomUUID ? crypto.randomUUID() : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}
