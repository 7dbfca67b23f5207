import { inject, injectable } from 'tsyringe';
import { hashApiKey } from '../domain/ids.js';
import type { ApiKeyResolver, KeyScope, Principal } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { RateLimits, type RateLimitVerdict } from './rate-limits.js';
import { UNAUTHORIZED, bearerKey, fail } from './respond.js';
import type { HttpRequest, HttpResponse } from './types.js';

/**
 * Who may call a route: the principal of a user's key and its scopes, the admin keys, and the answers of a refusal
 * (401, 403, 429, 503). The route table says what each route needs; this class checks it.
 */
@injectable()
export class Access {
  private readonly adminKeys: Map<string, string> | undefined;

  constructor(
    @inject(TOKENS.ApiKeys) private readonly apiKeys: ApiKeyResolver,
    @inject(RateLimits) readonly limits: RateLimits,
    @inject(TOKENS.Options) options: ResolvedServiceOptions,
  ) {
    this.adminKeys = options.admin?.keys;
  }

  /** The key's principal: null at once without a (well-formed) key; a host's resolver may answer without a promise. */
  principal(auth: string | undefined): PromiseLike<Principal | null> | Principal | null {
    const key = bearerKey(auth);
    return key === undefined ? null : this.apiKeys.resolve(key);
  }

  get adminEnabled(): boolean {
    return this.adminKeys !== undefined;
  }

  /** The actor an Authorization header's admin key stands for; null for anything else (a user's key too). */
  adminActor(auth: string | undefined): string | null {
    if (!this.adminKeys || !auth) return null;
    const key = bearerKey(auth);
    // A lookup by digest: timing says nothing about how much of a key matched.
    return key === undefined ? null : (this.adminKeys.get(hashApiKey(key)) ?? null);
  }

  /** Whether a bearer key is an admin key (refused on user routes even if a user store also knows it). */
  isAdminKey(auth: string | undefined): boolean {
    return this.adminActor(auth) !== null;
  }

  /**
   * The answer to a request without a valid key: 401. Bad keys are limited by address, after the key was looked at:
   * a valid key is never refused for what other requests from its address (a NAT, an office, a proxy) did.
   */
  unauthorized(req: HttpRequest): Promise<HttpResponse> {
    return this.limits.badKey(req.remoteAddress ?? 'unknown').then((verdict) => (verdict.allowed === true ? { ...UNAUTHORIZED } : this.limited(verdict)));
  }

  /** The 403 of a key without the scope a route needs; null when it has it. Keys of a host's own resolver carry no scopes. */
  scopeRefusal(principal: Principal, scope: KeyScope): HttpResponse | null {
    if (principal.scopes === undefined || principal.scopes.includes(scope)) return null;
    return fail('forbidden', `This API key lacks the "${scope}" scope this request needs.`);
  }

  limited(verdict: Exclude<RateLimitVerdict, { allowed: true }>): HttpResponse {
    if (verdict.allowed === 'unavailable') {
      return fail('unavailable', 'The rate limiter is unavailable; try again shortly.', undefined, { 'retry-after': '1' });
    }
    return fail('rate_limited', `Too many requests; try again in ${verdict.retryAfterSeconds} s.`, undefined, verdict.headers);
  }
}
