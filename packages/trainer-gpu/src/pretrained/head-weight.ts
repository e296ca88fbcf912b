import * as tf from "@tensorflow/tfjs";

/**
 * The output head as a `[d, V]` matrix. A tied head is `E^T`; WASM's transpose-flag matmul is very slow
 * for this product (the largest of the model), so `E` is transposed explicitly: inside the tape while `E`
 * is trainable (its gradient must flow), otherwise from a copy cached until `E`'s data changes.
 */
export class HeadWeight {
  private cached: { dataId: object; tensor: tf.Tensor } | undefined;

  /** `untied`: the `lm_head.weight` variable when the head is not tied, else undefined. */
  get(embeddings: tf.Variable, untied: tf.Variable | undefined): tf.Tensor2D {
    if (untied) return untied as tf.Tensor2D;
    if (embeddings.trainable) return tf.transpose(embeddings) as tf.Tensor2D;
    if (this.cached?.dataId !== embeddings.dataId) {
      this.cached?.tensor.dispose();
      this.cached = { dataId: embeddings.dataId, tensor: tf.keep(tf.transpose(embeddings)) };
    }
    return this.cached.tensor as tf.Tensor2D;
  }

  dispose(): void {
    this.cached?.tensor.dispose();
    this.cached = undefined;
  }
}
