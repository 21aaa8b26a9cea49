"""store/meta"""
