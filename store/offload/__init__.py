"""store/offload"""
