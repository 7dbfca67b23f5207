import type { Clock } from '../ports/clock.js';
import { inject, injectable } from 'tsyringe';
import { Accounts } from '../use-cases/accounts.js';
import { DomainError } from '../domain/errors.js';
import { hashApiKey } from '../domain/ids.js';
import type { KeyScope, Principal } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { bearerKey } from './respond.js';

/** The admin operations, each one route under `<mount>/v1/admin/`. */
export type AdminRoute =
  | { name: 'admin'; op: 'createUser' }
  | { name: 'admin'; op: 'credit'; userId: string }
  | { name: 'admin'; op: 'createKey'; userId: string }
  | { name: 'admin'; op: 'listKeys'; userId: string }
  | { name: 'admin'; op: 'revokeKey'; keyId: string }
  | { name: 'admin'; op: 'audit' };

/** What an answer is before the handler writes it: a status and a JSON value (none for 204). */
export interface Answer {
  status: number;
  body?: unknown;
}


/**
 * The scope each user route needs. `generate` spends or changes (create, quote, cancel, delete, rotating the webhook
 * secret); `read` only reads. A route not listed needs no key (files, the document) or is the admin's.
 */
export const SCOPE_OF_ROUTE: Readonly<Record<string, KeyScope>> = {
  create: 'generate',
  quote: 'generate',
  cancel: 'generate',
  delete: 'generate',
  rotateWebhookSecret: 'generate',
  createBatch: 'generate',
  cancelBatch: 'generate',
  getBatch: 'read',
  batchGenerations: 'read',
  models: 'read',
  list: 'read',
  get: 'read',
  events: 'read',
  deliveries: 'read',
  webhookSecret: 'read',
  balance: 'read',
  usage: 'read',
};

/** Why a principal may not use a route, or null when it may. A principal without scopes (a host's resolver) may. */
export function scopeRefusal(principal: Principal, route: string): DomainError | null {
  if (principal.scopes === undefined) return null;
  // A user route nobody listed here fails closed: it needs every scope until it is given its own.
  const needed = SCOPE_OF_ROUTE[route];
  if (needed === undefined) {
    return principal.scopes.length >= 2 ? null : new DomainError('forbidden', 'This API key lacks a scope this request needs.');
  }
  if (principal.scopes.includes(needed)) return null;
  return new DomainError('forbidden', `This API key lacks the "${needed}" scope this request needs.`);
}

/** The admin routes and the user's usage route: what they ask of `Accounts`, and the answer. */
@injectable()
export class AccountRoutes {
  private readonly adminKeys: Map<string, string> | undefined;
  private readonly clock: Clock;

  constructor(
    @inject(Accounts) private readonly accounts: Accounts,
    @inject(TOKENS.Options) options: ResolvedServiceOptions,
  ) {
    this.adminKeys = options.admin?.keys;
    this.clock = options.clock;
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

  async usage(userId: string, query: string, now: number = this.clock.now()): Promise<Answer> {
    const params = new URLSearchParams(query);
    const input: Record<string, string> = {};
    for (const name of new Set(params.keys())) {
      const values = params.getAll(name);
      if (values.length > 1) throw badField(name, `${name} may be given once`);
      input[name] = values[0]!;
    }
    return { status: 200, body: await this.accounts.usage(userId, input, now) };
  }

  async admin(route: AdminRoute, actor: string, body: () => unknown, query: string): Promise<Answer> {
    const who = { actor };
    switch (route.op) {
      case 'createUser':
        return { status: 201, body: await this.accounts.createUser(body() as never, who) };
      case 'credit':
        return { status: 200, body: await this.accounts.credit(route.userId, body() as never, who) };
      case 'createKey':
        return { status: 201, body: await this.accounts.createKey(route.userId, body() as never, who) };
      case 'listKeys':
        return { status: 200, body: { data: await this.accounts.listKeys(route.userId) } };
      case 'revokeKey':
        await this.accounts.revokeKey(route.keyId, who);
        return { status: 204 };
      case 'audit': {
        const params = new URLSearchParams(query);
        const limit = params.get('limit');
        const cursor = params.get('cursor');
        if (limit !== null && !/^[0-9]{1,4}$/.test(limit)) throw badField('limit', 'limit must be an integer from 1 to 200');
        return {
          status: 200,
          body: await this.accounts.auditLog({
            ...(limit !== null ? { limit: Number(limit) } : {}),
            ...(cursor !== null ? { cursor } : {}),
          }),
        };
      }
    }
  }
}

function badField(field: string, message: string): DomainError {
  return new DomainError('invalid_request', `${message}.`, { details: [{ field, code: 'invalid_value', message }] });
}
