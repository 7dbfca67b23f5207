/**
 * @module @genservice/mcp
 *
 * An MCP server (Streamable HTTP) for a genservice host: every model the user's key may use is a tool, a long
 * generation is an MCP task (SEP-1686) whose id is the generation's, and the user's recent generations are resources.
 * Every request is answered by asking the service's own HTTP entry point with the user's key, so every rule of the API
 * (scopes, allow-lists, budgets, 402 and 429, ownership, idempotency, metrics, webhooks) applies unchanged.
 *
 * @example
 * import { createMcpHandler } from '@genservice/mcp';
 * app.use('/gen/mcp', createMcpHandler(service, { apiPrefix: '/gen' }));   // Express, beside app.use('/gen', genserviceRouter(service))
 */
export { createMcpHandler, type McpHandler } from './handler.js';
export {
  DEFAULT_INLINE_MAX_BYTES,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_PAGE_SIZE,
  DEFAULT_TASK_POLL_INTERVAL_MS,
  type McpHandlerOptions,
} from './options.js';
export { RESOURCE_URI_PREFIX } from './resources.js';
export { taskStatus } from './tasks.js';
