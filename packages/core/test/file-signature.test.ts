import { describe, expect, it } from 'vitest';
import { FileUrlSigner } from '@genservice/core';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

function parts(path: string): { key: string; exp: string; sig: string } {
  const url = new URL(path, 'http://x.test');
  return { key: decodeURIComponent(url.pathname.split('/').pop()!), exp: url.searchParams.get('exp')!, sig: url.searchParams.get('sig')! };
}

describe('file URL signatures (issue 24, item 7)', () => {
  it('accept exactly one spelling: the siblings of the last base64url character are refused', () => {
    const signer = new FileUrlSigner('a secret of this test', 3600);
    const now = Date.now();
    for (const fileKey of ['a', 'gen_1/result.png', 'x'.repeat(40)]) {
      const { key, exp, sig } = parts(signer.sign(fileKey, now));
      expect(signer.verify(key, exp, sig, now)).toBe(true);
      const last = ALPHABET.indexOf(sig[42]!);
      // Only the top 4 of the last character's 6 bits are signature bits: these three decode to the same bytes.
      const siblings = [0, 1, 2, 3].map((low) => ALPHABET[(last & ~3) | low]!).filter((c) => c !== sig[42]);
      expect(siblings).toHaveLength(3);
      for (const c of siblings) {
        const spelled = sig.slice(0, 42) + c;
        expect(Buffer.from(spelled, 'base64url').equals(Buffer.from(sig, 'base64url'))).toBe(true);
        expect(signer.verify(key, exp, spelled, now), spelled).toBe(false);
      }
    }
  });

  it('still refuses a changed character, a wrong length and an expired URL', () => {
    const signer = new FileUrlSigner('a secret of this test', 3600);
    const now = Date.now();
    const { key, exp, sig } = parts(signer.sign('k', now));
    expect(signer.verify(key, exp, (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1), now)).toBe(false);
    expect(signer.verify(key, exp, `${sig}A`, now)).toBe(false);
    expect(signer.verify(key, exp, sig.slice(0, 42), now)).toBe(false);
    expect(signer.verify(key, exp, sig, (Number(exp) + 1) * 1000)).toBe(false);
  });
});
