/**
 * Routes by method and exact path, by path pattern (`/api/v1/batches/:id`: a `:name` segment
 * matches one non-empty segment), or by path prefix (static assets), the same on every backend.
 * A known path with another method gets 405 with Allow; anything else 404. A handler that throws or
 * rejects gets the contract's 500 (an HttpError it throws is answered as itself), and is logged; the
 * process never goes down for a handler's error.
 *
 * Paths under the prefixes of a CORS policy (cors()) are open to pages of other origins (cors.ts):
 * every answer there, a 404 or 405 included, carries the policy's headers, and a preflight is
 * answered before any route. Routes added under those prefixes later get it too.
 */
import type { Logger } from '../config/logger.js';
import { plainEarlyAnswer } from './backends/request-headers.js';
import { type CorsPolicy, corsAnswerHeaders, isPreflight, preflightHeaders, withCorsHeaders } from './cors.js';
import { HttpError, httpError } from './errors.js';
import { type AnswerRecorder, type ErrorRenderer, Exchange } from './exchange.js';
import type { EarlyAnswer, HttpRequest, HttpResponse } from './types.js';

export type { CorsPolicy } from './cors.js';

export type RouteHandler = (ex: Exchange) => void | Promise<void>;

/** How a group of routes answers its own unknown paths and wrong methods (the dashboard: HTML pages). */
export interface FallbackAnswers {
  notFound(ex: Exchange): void;
  methodNotAllowed(ex: Exchange, allowed: readonly string[]): void;
  /** A handler failed with something else than an HttpError. */
  failed?(ex: Exchange, err: unknown): void;
  /** The group's JSON error body, for the answers a backend writes itself (earlyAnswer); absent: the contract's. */
  render?: ErrorRenderer;
  /** The group's routes are authenticated by a cookie session (the dashboard): never under a CORS policy. */
  cookies?: boolean;
}

interface Route {
  handler: RouteHandler;
  fallback: FallbackAnswers | undefined;
}

interface Pattern {
  path: string;
  /** Literal segments as strings; `:name` segments as { name }. */
  segments: Array<string | { name: string }>;
}

interface Prefix {
  prefix: string;
  fallback: FallbackAnswers;
}

interface CorsRule {
  prefixes: readonly string[];
  policy: CorsPolicy;
}

/** The route label of preflights in metrics and logs (they never reach a route). */
export const PREFLIGHT_ROUTE = 'preflight';

const JSON_FALLBACK: FallbackAnswers = {
  notFound: (ex) => ex.error(httpError('not_found')),
  methodNotAllowed: (ex, allowed) => ex.error(httpError('method_not_allowed'), { Allow: allowed.join(', ') }),
};

export class Router {
  /** path → method → route */
  private readonly routes = new Map<string, Map<string, Route>>();
  /** Registered paths with `:name` segments (their routes are in `routes` under the pattern). */
  private readonly patterns: Pattern[] = [];
  /** Paths under a prefix answered by that group's fallback (longest prefix first). */
  private readonly prefixes: Prefix[] = [];
  /** Path prefixes open to other origins, and their policies. */
  private readonly corsRules: CorsRule[] = [];
  /** The methods of the routes under each CORS rule (a preflight to an unknown path there), until a route is added. */
  private readonly corsMethods = new Map<CorsRule, string[]>();

  constructor(
    private readonly record: AnswerRecorder,
    private readonly logger?: Logger,
  ) {}

  add(method: string, path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    const byMethod = this.routes.get(path) ?? new Map<string, Route>();
    const upper = method.toUpperCase();
    if (byMethod.has(upper)) throw new Error(`route ${upper} ${path} is registered twice`);
    byMethod.set(upper, { handler, fallback });
    this.corsMethods.clear();
    if (!this.routes.has(path) && path.includes('/:')) {
      const segments = path
        .split('/')
        .slice(1)
        .map((s) => (s.startsWith(':') ? { name: s.slice(1) } : s));
      this.patterns.push({ path, segments });
    }
    this.routes.set(path, byMethod);
  }

  get(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('GET', path, handler, fallback);
  }

  post(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('POST', path, handler, fallback);
  }

  delete(path: string, handler: RouteHandler, fallback?: FallbackAnswers): void {
    this.add('DELETE', path, handler, fallback);
  }

  /** The pattern matching `path` and its parameters; undefined when none does. */
  private match(path: string): { path: string; params: Record<string, string> } | undefined {
    const parts = path.split('/').slice(1);
    for (const pattern of this.patterns) {
      if (pattern.segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      const ok = pattern.segments.every((segment, i) => {
        const part = parts[i]!;
        if (typeof segment === 'string') return segment === part;
        if (part === '') return false;
        try {
          params[segment.name] = decodeURIComponent(part);
        } catch {
          return false;
        }
        return true;
      });
      if (ok) return { path: pattern.path, params };
    }
    return undefined;
  }

  /** Unknown paths under `prefix` (e.g. '/dashboard/') are answered by `fallback`. */
  group(prefix: string, fallback: FallbackAnswers): void {
    if (fallback.cookies) for (const rule of this.corsRules) for (const corsPrefix of rule.prefixes) this.checkApart(corsPrefix, prefix);
    this.prefixes.push({ prefix, fallback });
    this.prefixes.sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /**
   * Opens every path under `prefixes` (each '/.../', e.g. '/v1/') to pages of other origins by
   * `policy`: the routes there now and those added later, unknown paths and wrong methods included.
   * A prefix that overlaps a route group authenticated by cookies (the dashboard, whose sessions
   * must never be called from another origin) is refused, whichever comes first.
   */
  cors(prefixes: readonly string[], policy: CorsPolicy): void {
    for (const prefix of prefixes) {
      if (!/^\/(?:[^/]+\/)+$/.test(prefix)) throw new Error(`a CORS prefix is '/segment/' (got '${prefix}')`);
      for (const group of this.prefixes) if (group.fallback.cookies) this.checkApart(prefix, group.prefix);
      if (this.corsRules.some((rule) => rule.prefixes.includes(prefix))) throw new Error(`the CORS prefix ${prefix} is registered twice`);
    }
    this.corsRules.push({ prefixes: [...prefixes], policy });
  }

  private checkApart(corsPrefix: string, groupPrefix: string): void {
    if (corsPrefix.startsWith(groupPrefix) || groupPrefix.startsWith(corsPrefix))
      throw new Error(`the CORS prefix ${corsPrefix} overlaps the route group ${groupPrefix}, whose routes a cookie authenticates`);
  }

  private corsRule(path: string): CorsRule | undefined {
    return this.corsRules.find((rule) => rule.prefixes.some((prefix) => path.startsWith(prefix)));
  }

  /** The methods of every route under `rule`, path by path in the order the paths were first registered. */
  private methodsUnder(rule: CorsRule): string[] {
    let methods = this.corsMethods.get(rule);
    if (!methods) {
      const all = new Set<string>();
      for (const [path, byMethod] of this.routes) if (rule.prefixes.some((prefix) => path.startsWith(prefix))) for (const m of byMethod.keys()) all.add(m);
      methods = [...all];
      this.corsMethods.set(rule, methods);
    }
    return methods;
  }

  /**
   * The answer to a request the backend refuses itself before any route (a refused head or
   * framing): in the error body of the route group its path is under (a dialect's), with the CORS
   * headers of its policy; the contract's body elsewhere, or when the path is not known.
   */
  readonly earlyAnswer: EarlyAnswer = (req, refusal) => {
    const plain = plainEarlyAnswer(req, refusal);
    if (!req) return plain;
    const rule = this.corsRule(req.path);
    const cors = rule ? corsAnswerHeaders(rule.policy, req.header('origin')) : {};
    const render = this.prefixes.find((p) => req.path.startsWith(p.prefix))?.fallback.render;
    const code = refusal.status === 408 ? 'request_timeout' : 'validation_error';
    const rendered = render?.(new HttpError(refusal.status, code, refusal.message), '');
    const answer = rendered ? { status: rendered.status, headers: plain.headers, body: JSON.stringify(rendered.body) } : plain;
    return { ...answer, headers: withCorsHeaders(answer.headers, cors) };
  };

  /** The backend's entry point. */
  readonly handle = (req: HttpRequest, res: HttpResponse): void => {
    let routePath = req.path;
    let params: Record<string, string> = {};
    let byMethod = this.routes.get(req.path);
    if (!byMethod) {
      const matched = this.match(req.path);
      if (matched) {
        routePath = matched.path;
        params = matched.params;
        byMethod = this.routes.get(matched.path);
      }
    }
    const rule = this.corsRule(req.path);
    if (rule && isPreflight(req)) {
      const ex = new Exchange(req, res, PREFLIGHT_ROUTE, this.record);
      const methods = byMethod ? [...byMethod.keys()] : this.methodsUnder(rule);
      ex.send(204, preflightHeaders(rule.policy, req.header('origin'), methods), '', 'preflight');
      return;
    }
    const cors = rule ? corsAnswerHeaders(rule.policy, req.header('origin')) : undefined;
    if (!byMethod) {
      const group = this.prefixes.find((p) => req.path.startsWith(p.prefix));
      const ex = new Exchange(req, res, group ? `${group.prefix}*` : 'other', this.record, {}, cors);
      (group?.fallback ?? JSON_FALLBACK).notFound(ex);
      return;
    }
    const route = byMethod.get(req.method);
    if (!route) {
      const ex = new Exchange(req, res, routePath, this.record, params, cors);
      const any = byMethod.values().next().value as Route;
      (any.fallback ?? JSON_FALLBACK).methodNotAllowed(ex, [...byMethod.keys()]);
      return;
    }
    const ex = new Exchange(req, res, routePath, this.record, params, cors);
    let result: void | Promise<void>;
    try {
      result = route.handler(ex);
    } catch (err) {
      this.failed(ex, err, route.fallback);
      return;
    }
    if (result instanceof Promise) result.catch((err: unknown) => this.failed(ex, err, route.fallback));
  };

  private failed(ex: Exchange, err: unknown, fallback: FallbackAnswers | undefined): void {
    if (err instanceof HttpError) {
      ex.error(err);
      return;
    }
    if (!ex.open) return;
    this.logger?.error({ requestId: ex.requestId, route: ex.route, err }, 'request failed');
    if (fallback?.failed) fallback.failed(ex, err);
    else ex.error(httpError('internal_server_error'));
  }
}
