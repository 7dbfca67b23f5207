import { z } from 'zod';
import { MAX_TOKENS } from '../domain/amounts.js';
import { MAX_ORGANIZATION_WEIGHT } from '../domain/limits.js';

/** The admin API's organisation shapes (issue 40), for the route table and the OpenAPI document. */

const organizationBudgetSchema = z
  .object({ amount: z.number().positive().max(MAX_TOKENS), period: z.enum(['day', 'month', 'total']) })
  .describe('At most `amount` tokens reserved or charged by all members together per UTC day, UTC month, or in all');

export const adminNewOrganizationSchema = z.object({
  organizationId: z.string().min(1).max(200),
  budget: organizationBudgetSchema.optional(),
  maxInFlight: z.number().int().positive().max(1_000_000).optional().describe('Members\u2019 generations pending or processing at once, at most'),
  weight: z
    .number()
    .int()
    .positive()
    .max(MAX_ORGANIZATION_WEIGHT)
    .optional()
    .describe('Its share of the runner when all are busy (default 1), carried by its jobs to the queue'),
});

/** An in-flight cap in a PATCH body: a number sets it, `null` removes it, left out keeps it. */
function capChange(what: string) {
  return z.number().int().positive().max(1_000_000).nullable().optional().describe(`${what}; \`null\` removes it, left out keeps it`);
}

export const adminOrganizationLimitsChangeSchema = z.object({
  budget: organizationBudgetSchema.nullable().optional().describe('The organisation\u2019s budget; `null` removes it, left out keeps it'),
  maxInFlight: capChange('Members\u2019 generations pending or processing at once, at most'),
  weight: z.number().int().positive().max(MAX_ORGANIZATION_WEIGHT).optional().describe('Its share of the runner when all are busy; left out keeps it'),
});

export const adminOrganizationSchema = z.object({
  organizationId: z.string(),
  budget: organizationBudgetSchema.optional(),
  maxInFlight: z.number().int().optional(),
  weight: z.number().int(),
  createdAt: z.string(),
  members: z.array(z.object({ userId: z.string(), role: z.enum(['member', 'admin']), joinedAt: z.string() })),
  inFlight: z.number().int().describe('Members\u2019 generations reserved and not yet finished'),
  spent: z.number().optional().describe('With a budget: held plus charged in its current window'),
  remaining: z.number().optional().describe('With a budget: what is left of it in this window'),
  resetsAt: z.string().optional().describe('With a daily or monthly budget: when the window ends'),
});

export const adminNewMemberSchema = z.object({
  userId: z.string().min(1).max(200),
  role: z.enum(['member', 'admin']).optional().describe('`admin` may read the organisation\u2019s usage by member (default `member`)'),
});

export const adminMemberSchema = z.object({ organizationId: z.string(), userId: z.string(), role: z.enum(['member', 'admin']) });

export const organizationUsageSchema = z.object({
  data: z.array(
    z.object({
      period: z.string().optional().describe('groupBy=day: the UTC day, YYYY-MM-DD'),
      userId: z.string().optional().describe('groupBy=member'),
      count: z.number().int().describe('Generations that finished (settled) in the group'),
      tokens: z.number().describe('Tokens charged'),
    }),
  ),
  total: z.object({ count: z.number().int(), tokens: z.number() }),
});

const userBudgetSchema = z
  .object({ amount: z.number().positive().max(MAX_TOKENS), period: z.enum(['day', 'month', 'total']) })
  .describe('At most `amount` tokens reserved or charged by the user (all its keys) per UTC day, UTC month, or in all');

export const adminUserLimitsChangeSchema = z.object({
  budget: userBudgetSchema.nullable().optional().describe('The user’s own budget; `null` removes it, left out keeps it'),
  maxInFlight: capChange('The user’s generations pending or processing at once, at most'),
});

export const adminUserLimitsSchema = z.object({
  userId: z.string(),
  budget: userBudgetSchema.optional(),
  maxInFlight: z.number().int().optional(),
  inFlight: z.number().int().describe('Generations reserved and not yet finished since the user has had limits'),
  spent: z.number().optional().describe('With a budget: held plus charged in its current window'),
  remaining: z.number().optional().describe('With a budget: what is left of it in this window'),
  resetsAt: z.string().optional().describe('With a daily or monthly budget: when the window ends'),
});
