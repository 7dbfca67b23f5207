import { inject, injectable } from 'tsyringe';
import { ModelRegistry } from '../domain/registry.js';
import { buildOpenApiDocument } from '../openapi/openapi.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { json } from './respond.js';
import { ROUTE_TABLE } from './route-table/index.js';
import type { HttpResponse } from './types.js';

/** GET /v1/openapi.json: the document of the route table and this service's models, made once. */
@injectable()
export class OpenApiRoute {
  private text: string | undefined;

  constructor(
    @inject(ModelRegistry) private readonly registry: ModelRegistry,
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
  ) {}

  answer(): HttpResponse {
    this.text ??= JSON.stringify(buildOpenApiDocument(ROUTE_TABLE, this.registry, this.options));
    return json(200, this.text, { 'cache-control': 'public, max-age=60' });
  }
}
