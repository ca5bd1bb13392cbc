/**
 * The closed list of error codes of bgone, shared by the native core (native/errors.h), the
 * library API and the HTTP service. User-facing messages live here, not in C++: the message of
 * each code, and the specific messages of the failures that happen before any image is seen
 * (loading the addon, the manifest or a model), all internal_error.
 */
export const ERROR_CODES = [
  'missing_image',
  'validation_error',
  'image_too_large',
  'unsupported_media_type',
  'invalid_image',
  'foreground_not_found',
  'invalid_image_url',
  'failed_image_download',
  'internal_error',
  'invalid_roi',
  'model_unavailable',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * The HTTP status bgone's own API answers each code with (docs/contract.md), for an embedder who
 * answers HTTP too; the service's table (src/service/errors.ts) starts from this one.
 */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = Object.freeze({
  missing_image: 400,
  validation_error: 400,
  image_too_large: 400,
  unsupported_media_type: 415,
  invalid_image: 422,
  foreground_not_found: 422,
  invalid_image_url: 400,
  failed_image_download: 422,
  internal_error: 500,
  invalid_roi: 400,
  model_unavailable: 400,
});

const MESSAGES: Record<ErrorCode, string> = {
  missing_image: 'No image was provided.',
  validation_error: 'An option has an invalid value.',
  image_too_large: 'The image is too large: at most 20 MB and 6000 px per side.',
  unsupported_media_type: 'The file is not a JPG, PNG or WebP image.',
  invalid_image: 'The image could not be decoded: it is corrupt or truncated.',
  foreground_not_found: 'No foreground subject was found in the image.',
  invalid_image_url: 'The image URL is not valid: it must be an http:// or https:// URL without credentials, at most 2048 characters.',
  failed_image_download: 'The image could not be downloaded from its URL.',
  internal_error: 'The image could not be processed because of an internal error.',
  invalid_roi: 'The region of interest is empty or reaches outside the image.',
  model_unavailable: 'The model is not one this server offers.',
};

export class BgoneError extends Error {
  readonly code: ErrorCode;
  /** Machine-readable context, e.g. the offending field and its allowed values. */
  readonly details?: Record<string, unknown>;
  /** Developer-facing cause from the native core (never contains image bytes). */
  readonly detail?: string;

  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>, detail?: string) {
    super(message ?? MESSAGES[code]);
    this.name = 'BgoneError';
    this.code = code;
    if (details !== undefined) this.details = details;
    if (detail !== undefined) this.detail = detail;
  }
}

/** The developer-facing text of an underlying error. */
function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}

/**
 * The native addon, libvips or ONNX Runtime could not be loaded or started: nothing can be
 * processed in this process until it is rebuilt or reinstalled.
 */
export function addonLoadError(cause: unknown): BgoneError {
  return new BgoneError(
    'internal_error',
    'The bgone native core could not be loaded: reinstall the package or rebuild it with "npm run build:native".',
    { component: 'native' },
    describe(cause),
  );
}

/**
 * The addon loaded, but the ONNX Runtime library it was pointed at (the onnxRuntimeLibrary setting,
 * BGONE_ORT_LIBRARY) could not be opened or is no ONNX Runtime the addon can use.
 */
export function onnxRuntimeLoadError(library: string, cause: unknown): BgoneError {
  return new BgoneError(
    'internal_error',
    `The ONNX Runtime library ${library} could not be used (BGONE_ORT_LIBRARY, the onnxRuntimeLibrary setting): ` +
      'point it at an ONNX Runtime shared library (libonnxruntime.so.1), or leave it unset for the one bgone ships.',
    { component: 'onnxruntime', path: library },
    describe(cause),
  );
}

/** models/manifest.json is missing, unreadable or malformed. */
export function manifestError(path: string, problem: string, cause?: unknown): BgoneError {
  return new BgoneError(
    'internal_error',
    `The model manifest ${path} ${problem}.`,
    { component: 'models', path },
    cause === undefined ? undefined : describe(cause),
  );
}

/** The manifest lists a model whose file is not there. */
export function modelNotInstalledError(model: string, path: string): BgoneError {
  return new BgoneError('internal_error', `Model ${model} is not installed: ${path} does not exist. Install it with "npx bgone models add ${model}".`, {
    component: 'models',
    model,
    path,
  });
}

/**
 * ONNX Runtime could not create a session from the model file: it is corrupt, not ONNX, or not this
 * contract; on a GPU provider, the GPU setup may be at fault too (a device that does not exist,
 * CUDA or cuDNN failing when the session starts).
 */
/** An added model whose graph the checks before loading refuse (model-graph.ts), or cannot read. */
export function modelRefusedError(model: string, path: string, why: string): BgoneError {
  return new BgoneError(
    'internal_error',
    `Model ${model} is refused before it loads from ${path}: ${why} (docs/models.md, "What is checked").`,
    { component: 'models', model, path },
    why,
  );
}

export function modelLoadError(model: string, path: string, cause: unknown, provider = 'cpu'): BgoneError {
  const why =
    provider === 'cpu'
      ? 'a corrupt or incomplete file, or not an ONNX model'
      : `a corrupt or incomplete file, not an ONNX model, or the execution provider ${provider} failing: ${describe(cause)}`;
  return new BgoneError(
    'internal_error',
    `Model ${model} could not be loaded from ${path}: ONNX Runtime refused it (${why}).`,
    { component: 'models', model, path, ...(provider === 'cpu' ? {} : { provider }) },
    describe(cause),
  );
}

/**
 * The configured execution provider (executionProvider, BGONE_EXECUTION_PROVIDER) cannot be set up
 * with the loaded ONNX Runtime: CUDA or TensorRT without their provider libraries, WebGPU without the
 * Vulkan loader or a GPU adapter. The native core's text says what is missing.
 */
export function providerLoadError(model: string, path: string, provider: string, cause: unknown): BgoneError {
  const fallBack = `list a fall-back after it (BGONE_EXECUTION_PROVIDER=${provider},cpu), or use the cpu provider.`;
  const remedy = provider.startsWith('webgpu')
    ? `Install what is missing, ${fallBack}`
    : provider.startsWith('tensorrt')
      ? `Point the onnxRuntimeLibrary setting (BGONE_ORT_LIBRARY) at such a library, ${fallBack}`
      : `Point the onnxRuntimeLibrary setting (BGONE_ORT_LIBRARY) at such a library (\`bgone gpu install\` sets one up from npm), ${fallBack}`;
  return new BgoneError(
    'internal_error',
    `Model ${model} could not be loaded on the execution provider ${provider}: ${describe(cause)} ${remedy}`,
    { component: 'execution_provider', model, path, provider },
    describe(cause),
  );
}

/**
 * The TensorRT engine cache's folder (tensorrtCacheDir, BGONE_TENSORRT_CACHE_DIR) cannot be created.
 * An execution provider failure: a fall-back list goes on to its next entry.
 */
export function tensorrtCacheError(model: string, path: string, provider: string, dir: string, cause: unknown): BgoneError {
  const reason = `the TensorRT engine cache folder ${dir} cannot be created (${describe(cause)})`;
  return new BgoneError(
    'internal_error',
    `Model ${model} could not be loaded on the execution provider ${provider}: ${reason}. ` +
      "Point the tensorrtCacheDir setting (BGONE_TENSORRT_CACHE_DIR) at a folder this process may write, or turn the cache off ('' or off).",
    { component: 'execution_provider', model, path, provider },
    reason,
  );
}

/**
 * Maps an error thrown by the native addon to a BgoneError with the user-facing message. One the
 * background image caused (input: 'background') names its field.
 */
export function fromNativeError(err: unknown): BgoneError {
  if (err instanceof BgoneError) return err;
  const code = (err as { code?: unknown })?.code;
  const detail = describe(err);
  if (typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code)) {
    const details = (err as { input?: unknown }).input === 'background' ? { field: 'bg_image_file' } : undefined;
    return new BgoneError(code as ErrorCode, undefined, details, detail);
  }
  return new BgoneError('internal_error', undefined, undefined, detail);
}
