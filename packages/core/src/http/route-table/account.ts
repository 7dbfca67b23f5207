import { text } from '../query.js';
import { fail, Refusal } from '../respond.js';
import { type QuerySpec, type RouteEntry, route } from '../route.js';
import { z } from 'zod';
import { adminUserViewSchema, balanceResponseSchema, usageResponseSchema } from '../schemas.js';
import { jsonOf } from './shared.js';

/** A user's account: the balance, and usage read from the ledger. */

/**
 * The usage query: every parameter handed to `Accounts.usage`, which checks them (an unknown one is refused by
 * name); a parameter given twice is refused here.
 */
export function usageQuery(groupBy: readonly string[]): QuerySpec<Record<string, string>> {
  return {
    params: [
      text('from', 'First day, YYYY-MM-DD', { type: 'string', format: 'date' }),
      text('to', 'Last day, YYYY-MM-DD (default today, UTC)', { type: 'string', format: 'date' }),
      text('groupBy', 'How to group', { type: 'string', enum: [...groupBy], default: 'day' }),
    ],
    read(query) {
      const params = new URLSearchParams(query);
      const input: Record<string, string> = {};
      for (const name of new Set(params.keys())) {
        const values = params.getAll(name);
        if (values.length > 1) {
          const message = `${name} may be given once`;
          throw new Refusal(fail('invalid_request', `${message}.`, [{ field: name, code: 'invalid_value', message }]));
        }
        input[name] = values[0]!;
      }
      return input;
    },
  };
}

export const accountRoutes: RouteEntry[] = [
  route({
    name: 'balance',
    method: 'GET',
    path: '/v1/balance',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    answers: { 200: { description: 'Spendable tokens', schema: balanceResponseSchema } },
    doc: { operationId: 'getBalance', tag: 'Account', summary: 'Your balance', description: 'Spendable tokens (reserved ones are not included).' },
    handle: (call, s) => s.generations.balance(call.userId).then((balance) => jsonOf(200, { balance })),
  }),
  route({
    name: 'usage',
    method: 'GET',
    path: '/v1/usage',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    query: usageQuery(['day', 'model', 'key', 'member']),
    answers: { 200: { description: 'Usage', schema: usageResponseSchema } },
    errors: [400, 403],
    doc: {
      operationId: 'getUsage',
      tag: 'Account',
      summary: 'Your usage',
      description:
        'Settled spend and counts per UTC day, model or key, read from the ledger. `from` and `to` are days (both counted), at most 366 apart; by default the last 30 days. `groupBy=member` is for an admin of an organisation: its spend by member (`userId`); 403 for anyone else.',
    },
    handle: (call, s) => s.accounts.usage(call.userId, call.query()).then((report) => jsonOf(200, report)),
  }),
  route({
    name: 'keys',
    method: 'GET',
    path: '/v1/keys',
    auth: 'user',
    scope: 'read',
    rate: 'read',
    answers: { 200: { description: 'Your keys', schema: z.object({ data: adminUserViewSchema.shape.keys }) } },
    doc: {
      operationId: 'listOwnKeys',
      tag: 'Account',
      summary: 'Your keys',
      description: 'The caller\u2019s keys, oldest first (never a secret), each budgeted key with its spend in the current window. Needs the `read` scope.',
    },
    handle: (call, s) => s.operations.keys(call.userId).then((data) => jsonOf(200, { data })),
  }),
];
