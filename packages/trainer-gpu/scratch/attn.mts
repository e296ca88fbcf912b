import { selectBackend, tf } from "/work/main/packages/trainer-gpu/src/index.ts";
await selectBackend({ log: () => {} });
function bench(name: string, f: () => tf.Tensor) {
  for (let i = 0; i < 2; i++) f().dispose();
  const N = 10; let best = 1e9;
  for (let i = 0; i < N; i++) { const t0 = performance.now(); const c = f(); c.dataSync(); c.dispose(); best = Math.min(best, performance.now() - t0); }
  console.log(name, best.toFixed(2), "ms");
}
const q = tf.randomNormal([32, 4, 64, 16]), kT = tf.randomNormal([32, 4, 16, 64]), k = tf.randomNormal([32, 4, 64, 16]);
bench("batched q@kT", () => tf.matMul(q as tf.Tensor4D, kT as tf.Tensor4D));
bench("broadcast mul+sum", () => tf.tidy(() => tf.sum(tf.mul(tf.reshape(q, [32, 4, 64, 1, 16]), tf.reshape(k, [32, 4, 1, 64, 16])), -1)));
const q3 = tf.reshape(q, [128, 64, 16]), kT3 = tf.reshape(kT, [128, 16, 64]);
bench("per-slice 2D", () => tf.tidy(() => { const qs = tf.unstack(q3), ks = tf.unstack(kT3); return tf.stack(qs.map((x, i) => tf.matMul(x as tf.Tensor2D, ks[i] as tf.Tensor2D))); }));
// Block trick: per head h, [B*T, dh] @ [dh, B*T] computes cross-batch blocks too (B x waste).
const P = tf.randomNormal([32, 4, 64, 64]), v = tf.randomNormal([32, 4, 64, 16]);
bench("batched P@v", () => tf.matMul(P as tf.Tensor4D, v as tf.Tensor4D));
const vT = tf.randomNormal([32, 4, 16, 64]);
bench("batched (vT^T...) dO@vT", () => tf.matMul(v as tf.Tensor4D, vT as tf.Tensor4D));
// k-major: scores^T[j,i] = sum_d kT... alternative: (kT^T) computed as k @ q^T with q^T [16,64]
const qT = tf.randomNormal([32, 4, 16, 64]);
bench("k@qT", () => tf.matMul(k as tf.Tensor4D, qT as tf.Tensor4D));
// transposeB flag variant
bench("matMul(q, k, false, true)", () => tf.matMul(q as tf.Tensor4D, k as tf.Tensor4D, false, true));
// padded K=64? [..64,64]@[..64,64]
const a64 = tf.randomNormal([32, 4, 64, 64]), b64 = tf.randomNormal([32, 4, 64, 64]);
bench("64x64x64 batched", () => tf.matMul(a64 as tf.Tensor4D, b64 as tf.Tensor4D));
