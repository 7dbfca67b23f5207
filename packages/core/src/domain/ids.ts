import { hash, randomFillSync } from 'node:crypto';

// Random bytes drawn from the CSPRNG in blocks: one syscall per 256 ids instead of one per id.
const pool = Buffer.allocUnsafe(4096);
let offset = pool.length;

/** 128 random bits, base64url: reveals nothing about time or count. */
export function newGenerationId(): string {
  if (offset + 16 > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const id = pool.toString('base64url', offset, offset + 16);
  offset += 16;
  return id;
}

/** Generation ids are exactly 22 base64url characters; anything else cannot exist, so it is answered without a lookup. */
export const GENERATION_ID_PATTERN = /^[A-Za-z0-9_-]{22}$/;

/** A key's public id: 128 random bits, so it says nothing about the key's secret, its owner or when it was made. */
export function newKeyId(): string {
  return `key_${newGenerationId()}`;
}

/** A batch's id: `batch_` and 128 random bits. */
export function newBatchId(): string {
  return `batch_${newGenerationId()}`;
}

export const BATCH_ID_PATTERN = /^batch_[A-Za-z0-9_-]{22}$/;

/** A registered webhook endpoint's id: `we_` and 128 random bits. */
export function newWebhookEndpointId(): string {
  return `we_${newGenerationId()}`;
}

export const WEBHOOK_ENDPOINT_ID_PATTERN = /^we_[A-Za-z0-9_-]{22}$/;

/** The longest key an `Authorization: Bearer` header is read with (user and admin keys alike); a longer one is no key. */
export const MAX_API_KEY_LENGTH = 512;

/** Hex SHA-256 of an API key: the only form in which any store keeps a key. */
export function hashApiKey(apiKey: string): string {
  // One-shot hash (Node >= 20.12): no Hash object for a digest taken on every request.
  return hash('sha256', apiKey, 'hex');
}
