import type { WebhookEvent } from './types.js';

/** A delivery that is not from the service: bad or missing signature, or a timestamp too far from now. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError' as const;
}

/** How far a delivery's timestamp may be from now, in seconds: older ones may be replays. */
const TOLERANCE_SECONDS = 5 * 60;

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  const v = record[name] ?? record[Object.keys(record).find((k) => k.toLowerCase() === name) ?? ''];
  return Array.isArray(v) ? v[0] : v;
}

function base64ToBytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function bytesToBase64(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Compares without an early exit, so the time taken does not tell how much of a forged signature matched. */
function equal(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Verifies a webhook delivery (Standard Webhooks) and returns its event. Give it the raw body exactly as received
 * (before any JSON parser), the request's headers, and your secret (`whsec_...` from GET /v1/webhooks/secret).
 * Accepts any of the signatures the delivery carries (during a rotation it carries two). Throws
 * WebhookVerificationError otherwise. Uses Web Crypto only: Node 20+, Deno, Bun, browsers and edge runtimes.
 *
 * @example
 * app.post('/hooks', express.raw({ type: 'application/json' }), async (req, res) => {
 *   const event = await verifyWebhook(process.env.GENSERVICE_WEBHOOK_SECRET!, req.body, req.headers);
 *   if (event.type === 'generation.completed') await save(event.data);
 *   res.sendStatus(204);
 * });
 */
export async function verifyWebhook(
  secret: string,
  rawBody: string | Uint8Array | ArrayBuffer,
  headers: HeaderSource,
  options: { now?: number; toleranceSeconds?: number } = {},
): Promise<WebhookEvent> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature');
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError('webhook-timestamp is not a number of seconds');
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? TOLERANCE_SECONDS)) {
    throw new WebhookVerificationError('webhook-timestamp is too far from now');
  }
  const body = typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody instanceof ArrayBuffer ? new Uint8Array(rawBody) : rawBody);
  const keyBytes = base64ToBytes(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
  const key = await crypto.subtle.importKey('raw', keyBytes as BufferSource, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`${id}.${timestamp}.${body}`)));
  const expected = bytesToBase64(mac);
  const ok = signatures.split(' ').some((part) => {
    const [version, sig] = part.split(',', 2);
    return version === 'v1' && sig !== undefined && equal(sig, expected);
  });
  if (!ok) throw new WebhookVerificationError('no valid signature');
  try {
    return JSON.parse(body) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('the body is not JSON');
  }
}
