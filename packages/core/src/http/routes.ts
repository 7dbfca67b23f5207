import { fail } from './respond.js';
import { pathParamNames, type RouteEntry } from './route.js';
import { ROUTE_TABLE } from './route-table/index.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { HttpResponse } from './types.js';

/** The dispatcher's view of the route table: one pattern per path, its methods, and the names of its segments. */
interface PathRoutes {
  template: string;
  pattern: RegExp;
  params: string[];
  methods: Record<string, RouteEntry>;
  /** What a 405 of this path answers in Allow (GET brings HEAD), in the table's order. */
  allow: string[];
  /** Its entries' `servedWhen`: without it the path is served always. */
  servedWhen?: RouteEntry['servedWhen'];
  /** Its entries' error shape. */
  errorShape: 'native' | 'openai';
}

/** The route a request matched: its entry, its path template, and each `{name}` segment of the path as it came. */
export type RouteMatch = { readonly entry: RouteEntry; readonly name: string; readonly template: string; readonly [param: string]: unknown };

function escape(literal: string): string {
  return literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A path's pattern: each `{name}` one segment; a trailing slash accepted unless `exact`. */
function patternOf(path: string, exact: boolean): RegExp {
  const source = path
    .split(/\{[^}]+\}/)
    .map(escape)
    .join('([^/]+)');
  return new RegExp(`^${source}${exact ? '' : '\\/?'}$`);
}

function compile(table: readonly RouteEntry[]): PathRoutes[] {
  const byPath = new Map<string, PathRoutes>();
  for (const entry of table) {
    let path = byPath.get(entry.path);
    if (path === undefined) {
      path = { template: entry.path, pattern: entry.pattern ?? patternOf(entry.path, entry.exact === true), params: pathParamNames(entry.path), methods: {}, allow: [], errorShape: entry.errorShape ?? 'native' };
      if (entry.servedWhen) path.servedWhen = entry.servedWhen;
      byPath.set(entry.path, path);
    }
    if (path.servedWhen !== entry.servedWhen || path.errorShape !== (entry.errorShape ?? 'native')) {
      throw new Error(`route ${entry.method} ${entry.path}: every entry of a path must have the same servedWhen and errorShape`);
    }
    // Mistakes in the table show at once, when the module loads.
    if (path.methods[entry.method]) throw new Error(`the route table declares ${entry.method} ${entry.path} twice`);
    if (entry.path.startsWith('/v1/') && entry.doc === undefined) throw new Error(`route ${entry.method} ${entry.path} has no doc`);
    for (const name of path.params) {
      if (entry.doc !== undefined && entry.params?.[name] === undefined) throw new Error(`route ${entry.method} ${entry.path}: {${name}} has no entry in params`);
    }
    path.methods[entry.method] = entry;
    path.allow.push(...(entry.method === 'GET' ? ['GET', 'HEAD'] : [entry.method]));
  }
  return [...byPath.values()];
}

const PATHS = compile(ROUTE_TABLE);

/** Every `METHOD /path/{param}` of the API (`/v1/...`); the OpenAPI test checks the document lists exactly these. */
export const SERVED_ROUTES: readonly string[] = ROUTE_TABLE.filter((r) => r.path.startsWith('/v1/')).map((r) => `${r.method} ${r.path}`);

/** The methods a path answers (GET brings HEAD); undefined for a path that is no endpoint (or not served with `options`). */
export function allowedMethods(path: string, options?: ResolvedServiceOptions): readonly string[] | undefined {
  return PATHS.find((p) => (p.servedWhen === undefined || (options !== undefined && p.servedWhen(options))) && p.pattern.test(path))?.allow;
}

/**
 * The error shape of a path that matched no route: that of the optional surface whose paths it is under, when served
 * (`/openai/v1/nope` answers OpenAI's 404), else the native one.
 */
export function errorShapeOf(path: string, options: ResolvedServiceOptions): 'native' | 'openai' {
  return options.openai !== undefined && (path === '/openai/v1' || path.startsWith('/openai/v1/')) ? 'openai' : 'native';
}

/**
 * The route of a method and path (query string removed); the 404 or 405 answer when there is none. A path whose
 * entries are not served with `options` (`servedWhen`) is no route; without `options`, neither is any such path.
 */
export function matchRoute(method: string, path: string, options?: ResolvedServiceOptions): RouteMatch | HttpResponse {
  for (const p of PATHS) {
    if (p.servedWhen !== undefined && (options === undefined || !p.servedWhen(options))) continue;
    const m = p.pattern.exec(path);
    if (!m) continue;
    const entry = p.methods[method];
    if (!entry) return fail('method_not_allowed', `Method ${method} is not allowed here.`, undefined, { allow: p.allow.join(', ') });
    const match: Record<string, unknown> = { entry, name: entry.name, template: p.template };
    for (let i = 0; i < p.params.length; i++) match[p.params[i]!] = m[i + 1] ?? '';
    return match as RouteMatch;
  }
  return fail('not_found', 'No such endpoint.');
}
