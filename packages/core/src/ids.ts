import { randomBytes } from 'node:crypto';

/** 128 random bits, base64url: reveals nothing about time or count. */
export function newGenerationId(): string {
  return randomBytes(16).toString('base64url');
}

/** Generation ids are exactly 22 base64url characters; anything else cannot exist, so it is answered without a lookup. */
export const GENERATION_ID_PATTERN = /^[A-Za-z0-9_-]{22}$/;
