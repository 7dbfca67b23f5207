import type { Principal } from '../ports/api-keys.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { Refusal, decodeSegment, fail, idempotencyKeyOf } from './respond.js';
import type { AdminCall, UserCall } from './route.js';
import type { RouteMatch } from './routes.js';
import type { HttpRequest } from './types.js';

/**
 * A request as its route's handler sees it: its path segments, query and body, each read with what the route's entry
 * declares (so a handler cannot read them any other way), and who is calling.
 */
export class RouteCall implements UserCall, AdminCall {
  constructor(
    readonly req: HttpRequest,
    private readonly match: RouteMatch,
    readonly rawQuery: string,
    private readonly limits: ResolvedServiceOptions['limits'],
    private readonly who?: Principal | string,
  ) {}

  get principal(): Principal {
    return this.who as Principal;
  }

  get userId(): string {
    return (this.who as Principal).userId;
  }

  get actor(): string {
    return this.who as string;
  }

  rawParam(name: string): string {
    return this.match[name] as string;
  }

  param(name: string): string {
    const decoded = decodeSegment(this.match[name] as string);
    if (decoded === null) throw new Refusal(fail('not_found', this.match.entry.params?.[name]?.notFound ?? 'No such endpoint.'));
    return decoded;
  }

  query(): never {
    const spec = this.match.entry.query;
    if (spec === undefined) throw new Error(`route ${this.match.entry.name} reads a query it does not declare`);
    return spec.read(this.rawQuery) as never;
  }

  body(): never {
    const spec = this.match.entry.body;
    if (spec === undefined) throw new Error(`route ${this.match.entry.name} reads a body it does not declare`);
    return spec.read(this.req, this.limits.bodyBytes) as never;
  }

  idempotencyKey(): string | undefined {
    const key = idempotencyKeyOf(this.req, this.limits.idempotencyKeyLength);
    if (typeof key === 'object') throw new Refusal(key);
    return key;
  }
}
