/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The shape filters' hash (dpp/core/filter.h), under its old name for libdpp. */
#ifndef DPP_FILTER_H
#define DPP_FILTER_H

#include "core/filter.h"

#endif /* DPP_FILTER_H */
