import type { ModelRegistry } from '../domain/registry.js';
import type { RouteEntry } from '../http/route.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { ERROR_CODES, errorResponseSchema, generationDetailsSchemas } from '../http/schemas.js';
import { ref, schema, type Json } from './common.js';
import { pathsOf } from './paths.js';

/** The contract's exact shape of one status: its fields, all required. */
function status(name: string, props: string[], required: string[]): Json {
  return {
    type: 'object',
    title: name,
    properties: Object.fromEntries(
      props.map((p) => [
        p,
        p === 'status'
          ? { type: 'string', const: name }
          : p === 'result'
            ? { type: 'string', description: 'The text, or the URL of the file' }
            : { type: 'number', description: 'Tokens charged' },
      ]),
    ),
    required,
    additionalProperties: false,
  };
}

/**
 * The OpenAPI 3.1 document of this service: its operations read from the route table (`routes`), each body and
 * answer from the zod schemas the handler validates with, and a create's body from each model's compiled settings
 * schema, so it cannot drift from what is enforced.
 */
export function buildOpenApiDocument(routes: readonly RouteEntry[], registry: ModelRegistry, options: ResolvedServiceOptions): Json {
  const errorSchema = schema(errorResponseSchema);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Generation Service',
      version: '1.0.0',
      description:
        'Asynchronous generation jobs: list models, start a generation that runs in the background, poll it or follow it live, pay for it in tokens, and see only your own.',
      license: { name: 'MIT', identifier: 'MIT' },
      contact: { name: 'genservice' },
    },
    servers: [{ url: options.publicUrl ?? '/', description: options.publicUrl ? 'This service' : 'Relative to where this document was served' }],
    tags: [
      { name: 'Models', description: 'What can be generated, and with which settings' },
      { name: 'Generations', description: 'Starting, reading, listing, cancelling and deleting generations' },
      { name: 'Live status', description: 'Following a generation without polling' },
      { name: 'Webhooks', description: 'Signed notifications to your own receiver' },
      { name: 'Batches', description: 'Many generations started, reserved and followed as one' },
      { name: 'Account', description: 'Your balance and prices' },
      { name: 'Files', description: 'Result files at signed, expiring URLs' },
      { name: 'Meta', description: 'This document' },
      { name: 'Admin', description: 'Users, credits, keys and the audit log, for the host\u2019s admin (served only with the `admin` option)' },
    ],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Your API key' },
        adminBearer: { type: 'http', scheme: 'bearer', description: 'An admin key (the `admin.apiKeys` option); a user\u2019s key is refused here' },
      },
      schemas: {
        Error: { ...errorSchema, description: `Every error. \`error.code\` is one of: ${ERROR_CODES.join(', ')}.` },
        Generation: {
          description: 'The contract\u2019s exact per-state shapes',
          oneOf: [ref('GenerationPending'), ref('GenerationProcessing'), ref('GenerationCompleted'), ref('GenerationFailed')],
          discriminator: {
            propertyName: 'status',
            mapping: {
              pending: '#/components/schemas/GenerationPending',
              processing: '#/components/schemas/GenerationProcessing',
              completed: '#/components/schemas/GenerationCompleted',
              failed: '#/components/schemas/GenerationFailed',
            },
          },
        },
        GenerationPending: status('pending', ['status'], ['status']),
        GenerationProcessing: status('processing', ['status'], ['status']),
        GenerationCompleted: status('completed', ['status', 'result', 'price'], ['status', 'result', 'price']),
        GenerationFailed: status('failed', ['status', 'price'], ['status', 'price']),
        GenerationDetails: {
          description: 'The details view (and a list item): one shape per status, told apart by `status`',
          oneOf: [ref('GenerationDetailsPending'), ref('GenerationDetailsProcessing'), ref('GenerationDetailsCompleted'), ref('GenerationDetailsFailed')],
          discriminator: {
            propertyName: 'status',
            mapping: {
              pending: '#/components/schemas/GenerationDetailsPending',
              processing: '#/components/schemas/GenerationDetailsProcessing',
              completed: '#/components/schemas/GenerationDetailsCompleted',
              failed: '#/components/schemas/GenerationDetailsFailed',
            },
          },
        },
        GenerationDetailsPending: schema(generationDetailsSchemas.pending),
        GenerationDetailsProcessing: schema(generationDetailsSchemas.processing),
        GenerationDetailsCompleted: schema(generationDetailsSchemas.completed),
        GenerationDetailsFailed: schema(generationDetailsSchemas.failed),
      },
    },
    security: [{ bearer: [] }],
    paths: pathsOf(routes, { registry, options }),
  };
}
