// layers: the umbrella header of tapeflow::layers (Layer, initializers, activations, Dense,
// BatchNormalization, Dropout, Flatten, Reshape, Activation, LeakyReLU, Conv2D, Conv2DTranspose,
// MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D, UpSampling2D, ZeroPadding2D,
// merge layers, SimpleRNN, LSTM, GRU, Bidirectional, InputLayer, KerasTensor, serialization;
// LayerNormalization, MultiHeadAttention, Embedding, PositionEmbedding, Permute,
// GlobalAveragePooling1D, GlobalMaxPooling1D, Conv1D, MaxPooling1D, AveragePooling1D, RMSNormalization).
#pragma once

#include "layers/activation.h"
#include "layers/activations.h"
#include "layers/attention/multi_head_attention.h"
#include "layers/convolutional/conv1d.h"
#include "layers/core/embedding.h"
#include "layers/core/position_embedding.h"
#include "layers/normalization/layer_normalization.h"
#include "layers/normalization/rms_normalization.h"
#include "layers/pooling/global_pooling1d.h"
#include "layers/pooling/pooling1d.h"
#include "layers/batch_normalization.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/ops/not_equal.h"
#include "layers/initializers.h"
#include "layers/input_layer.h"
#include "layers/keras_tensor.h"
#include "layers/layer.h"
#include "layers/merge.h"
#include "layers/pooling2d.h"
#include "layers/reshape.h"
#include "layers/reshaping/permute.h"
#include "layers/reshaping2d.h"
#include "layers/rnn/bidirectional.h"
#include "layers/rnn/gru.h"
#include "layers/rnn/lstm.h"
#include "layers/rnn/rnn.h"
#include "layers/rnn/simple_rnn.h"
#include "layers/serialization.h"
