/**
 * Which models a request may name (the `model` option): those the operator allows
 * (BGONE_MODELS_ALLOWED: names, or `all` for every installed model; by default the default model
 * only, the manifest's or on a GPU provider its float variant) and that are installed. Anything else is 400 model_unavailable, before a credit is reserved.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { defaultModelName, readManifest } from '../lib/models.js';
import { librarySettings } from '../lib/settings.js';
import { ApiError } from './errors.js';

/** The operator's list: model names, or 'all' (every installed model). */
export type ModelsAllowed = readonly string[] | 'all';

/** The installed models a request may name, the service's default first. */
export function allowedModels(serviceDefault: string | undefined, allowed: ModelsAllowed | undefined): string[] {
  const manifest = readManifest();
  const fallback = serviceDefault ?? defaultModelName();
  const names = allowed === 'all' ? Object.keys(manifest.models) : allowed && allowed.length > 0 ? allowed : [fallback];
  const installed = (name: string) => Object.hasOwn(manifest.models, name) && existsSync(join(librarySettings().modelsDir, manifest.models[name]!.file));
  return [...new Set([fallback, ...names])].filter((name) => installed(name) && (name === fallback || names.includes(name)));
}

/**
 * The model a request runs (its `model`, else the service's default, else the library's: the
 * manifest's, or on a GPU provider its float variant), or
 * ApiError model_unavailable naming the ones it may use.
 */
export function requestModel(requested: string | undefined, serviceDefault: string | undefined, allowed: ModelsAllowed | undefined): string {
  const name = requested ?? serviceDefault ?? defaultModelName();
  const usable = allowedModels(serviceDefault, allowed);
  if (!usable.includes(name)) {
    throw new ApiError('model_unavailable', `Model ${JSON.stringify(name)} is not available on this server; it offers ${usable.join(', ')}.`, {
      field: 'model',
      allowed: usable,
    });
  }
  return name;
}
