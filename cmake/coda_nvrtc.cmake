# coda::nvrtc, NVRTC without the CUDA driver: CUDA::nvrtc lists CUDA::cuda_driver (stubs/libcuda.so) in its
# interface, and a link without --as-needed then makes every binary need libcuda.so.1 just to start. coda loads
# libcuda with dlopen at run time (src/driver/). Included after find_package(CUDAToolkit) by the build and by
# the installed package (codaConfig.cmake), so that both link the same way.
if(NOT TARGET coda::nvrtc)
  get_target_property(_coda_nvrtc_file CUDA::nvrtc IMPORTED_LOCATION)
  add_library(coda::nvrtc INTERFACE IMPORTED)
  set_target_properties(coda::nvrtc PROPERTIES INTERFACE_LINK_LIBRARIES "${_coda_nvrtc_file}")
  unset(_coda_nvrtc_file)
endif()
