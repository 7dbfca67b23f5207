import type { RouteEntry } from '../route.js';
import { accountRoutes } from './account.js';
import { adminRoutes } from './admin.js';
import { batchRoutes } from './batches.js';
import { generationRoutes } from './generations.js';
import { openAiRoutes } from './openai.js';
import { organizationRoutes } from './organizations.js';
import { operationsRoutes } from './operations.js';
import { pushRoutes } from './push.js';
import { siteRoutes } from './site.js';
import { uploadRoutes } from './uploads.js';
import { webhookEndpointRoutes } from './webhook-endpoints.js';

/**
 * The route table: every route the service answers, each declared once (see `../route.ts` for what an entry holds).
 * Adding a route is one entry in the file of its area, and the use-case method its handler calls.
 */
export const ROUTE_TABLE: readonly RouteEntry[] = [...generationRoutes, ...pushRoutes, ...webhookEndpointRoutes, ...batchRoutes, ...accountRoutes, ...uploadRoutes, ...adminRoutes, ...organizationRoutes, ...operationsRoutes, ...siteRoutes, ...openAiRoutes];
