/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The DLPack ABI (https://dmlc.github.io/dlpack/), declared here from the
 * published specification, version 1.x: the versioned managed tensor of
 * 1.0 and the legacy one of 0.x.  Only what the extension uses.
 */
#ifndef DMT_DLPACK_H
#define DMT_DLPACK_H

#include <stdint.h>

#define DMT_DLPACK_MAJOR 1
#define DMT_DLPACK_MINOR 0

/* DLDeviceType (an enum, int-sized, in the specification) */
enum {
	kDLCPU = 1,
	kDLCUDA = 2,
	kDLCUDAHost = 3,
	kDLCUDAManaged = 13,
};

/* DLDataTypeCode */
enum {
	kDLInt = 0,
	kDLUInt = 1,
	kDLFloat = 2,
};

/* DLManagedTensorVersioned.flags */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1ull << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ull << 1)

typedef struct {
	uint32_t major;
	uint32_t minor;
} DLPackVersion;

typedef struct {
	int32_t device_type;	/* DLDeviceType */
	int32_t device_id;
} DLDevice;

typedef struct {
	uint8_t code;		/* DLDataTypeCode */
	uint8_t bits;
	uint16_t lanes;
} DLDataType;

typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;	/* NULL: compact row-major */
	uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
	DLPackVersion version;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensorVersioned *self);
	uint64_t flags;
	DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif
