/**
 * Matte quality metrics, defined as in ../shared/datasets/dev/BASELINE.md so that numbers compare:
 * IoU of the masks at alpha >= 128, alpha MAE, SAD/1000, and the boundary F-measure at 3 px.
 * Inputs are 8-bit single-channel arrays of the same size.
 */
export interface MatteScores {
  iou: number;
  mae: number;
  sad: number;
  boundaryF: number;
}

function boundary(mask: Uint8Array, w: number, h: number): Uint8Array {
  // Foreground pixels with a background 4-neighbour (neighbours outside the image do not count).
  const out = new Uint8Array(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (!mask[i]) continue;
      if ((x > 0 && !mask[i - 1]) || (x < w - 1 && !mask[i + 1]) || (y > 0 && !mask[i - w]) || (y < h - 1 && !mask[i + w])) out[i] = 1;
    }
  }
  return out;
}

// Marks every pixel within `radius` (Euclidean) of a set pixel.
function dilate(points: Uint8Array, w: number, h: number, radius: number): Uint8Array {
  const out = new Uint8Array(w * h);
  const offsets: Array<[number, number]> = [];
  for (let dy = -radius; dy <= radius; dy++) for (let dx = -radius; dx <= radius; dx++) if (dx * dx + dy * dy <= radius * radius) offsets.push([dx, dy]);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if (!points[y * w + x]) continue;
      for (const [dx, dy] of offsets) {
        const nx = x + dx,
          ny = y + dy;
        if (nx >= 0 && ny >= 0 && nx < w && ny < h) out[ny * w + nx] = 1;
      }
    }
  }
  return out;
}

export function scoreMatte(pred: Uint8Array, gt: Uint8Array, w: number, h: number): MatteScores {
  const n = w * h;
  if (pred.length !== n || gt.length !== n) throw new Error('prediction and ground truth differ in size');
  let inter = 0,
    union = 0,
    absSum = 0;
  const pm = new Uint8Array(n),
    gm = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const p = pred[i]! >= 128 ? 1 : 0,
      g = gt[i]! >= 128 ? 1 : 0;
    pm[i] = p;
    gm[i] = g;
    inter += p & g;
    union += p | g;
    absSum += Math.abs(pred[i]! - gt[i]!) / 255;
  }
  const pb = boundary(pm, w, h),
    gb = boundary(gm, w, h);
  const pNear = dilate(gb, w, h, 3),
    gNear = dilate(pb, w, h, 3);
  let pCount = 0,
    pHit = 0,
    gCount = 0,
    gHit = 0;
  for (let i = 0; i < n; i++) {
    if (pb[i]) {
      pCount++;
      pHit += pNear[i]!;
    }
    if (gb[i]) {
      gCount++;
      gHit += gNear[i]!;
    }
  }
  let boundaryF: number;
  if (pCount === 0 && gCount === 0) boundaryF = 1;
  else if (pCount === 0 || gCount === 0) boundaryF = 0;
  else {
    const precision = pHit / pCount,
      recall = gHit / gCount;
    boundaryF = precision + recall > 0 ? (2 * precision * recall) / (precision + recall) : 0;
  }
  return { iou: union ? inter / union : 1, mae: absSum / n, sad: absSum / 1000, boundaryF };
}

export function meanScores(list: MatteScores[]): MatteScores {
  const sum = list.reduce((a, s) => ({ iou: a.iou + s.iou, mae: a.mae + s.mae, sad: a.sad + s.sad, boundaryF: a.boundaryF + s.boundaryF }), {
    iou: 0,
    mae: 0,
    sad: 0,
    boundaryF: 0,
  });
  const k = Math.max(1, list.length);
  return { iou: sum.iou / k, mae: sum.mae / k, sad: sum.sad / k, boundaryF: sum.boundaryF / k };
}

/** Ranks of `values` from 1, ties sharing the mean of their ranks. */
function ranks(values: readonly number[]): number[] {
  const order = values.map((v, i) => [v, i] as const).sort((a, b) => a[0] - b[0]);
  const out = new Array<number>(values.length);
  for (let i = 0; i < order.length; ) {
    let j = i;
    while (j + 1 < order.length && order[j + 1]![0] === order[i]![0]) j++;
    for (let k = i; k <= j; k++) out[order[k]![1]] = (i + j) / 2 + 1;
    i = j + 1;
  }
  return out;
}

/** Spearman's rank correlation of two paired lists (Pearson's on their ranks); NaN under 3 pairs or with no spread. */
export function spearman(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) throw new Error('the lists differ in length');
  const n = a.length;
  if (n < 3) return Number.NaN;
  const [ra, rb] = [ranks(a), ranks(b)];
  const mean = (n + 1) / 2;
  let num = 0;
  let da = 0;
  let db = 0;
  for (let i = 0; i < n; i++) {
    num += (ra[i]! - mean) * (rb[i]! - mean);
    da += (ra[i]! - mean) ** 2;
    db += (rb[i]! - mean) ** 2;
  }
  return da > 0 && db > 0 ? num / Math.sqrt(da * db) : Number.NaN;
}
