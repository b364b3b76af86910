// Checks a variable-length string attribute's global-heap objects before HDF5 reads them.
//
// HDF5 1.10.8 trusts the global heap: a collection's object walk (H5HG deserialize) loops forever
// on a zero-sized free-space object and runs past the collection on a huge object size, and
// H5HG_read copies the heap object's size into a buffer sized by the attribute's own element
// length, and indexes the object table without a bound. So before H5Aread converts such an
// attribute, this finds its raw elements (length, collection address, object index) in the
// object header itself and checks, against the file's bytes, that every collection they name
// lies inside the file, walks to its end in bounds, holds the object, and that the object's size
// is the element's length. Not public API.
// Facts:    reads object header versions 1 and 2 with continuation chunks; attribute messages of
//           versions 1 to 3 with unshared datatype and dataspace. Attributes kept in dense storage
//           (a fractal heap: more than 8 attributes on an object, or very large ones) are not
//           found and so refused; h5py and Keras write Keras's few root and group attributes
//           compact.
// Errors:   std::runtime_error with the problem (the caller prefixes file and object).
#pragma once

#include <cstdint>
#include <string>

namespace tapeflow::io::internal {

struct VlenCheckInput {
  std::string path;                 // the file, read with its own descriptor
  std::int64_t file_size = 0;
  std::uint64_t base_address = 0;   // the user block's size: addresses are relative to it
  std::uint64_t header_address = 0; // the object's header (H5O_info_t::addr)
  unsigned sizeof_addr = 8;         // H5Pget_sizes of the file-creation properties
  unsigned sizeof_size = 8;
  std::string attribute;            // its name
  std::int64_t max_total_bytes = 0; // the sum of the strings' lengths may not exceed this
};

// Returns the number of elements of the attribute after checking them as described above.
// Errors: std::runtime_error "<problem>" when the header or a heap collection is damaged, the
// attribute is not in the header, or the strings exceed max_total_bytes.
std::int64_t check_vlen_string_attribute(const VlenCheckInput& in);

}  // namespace tapeflow::io::internal
